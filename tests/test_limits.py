"""A small run through the real ``opencompass`` under real limits: a disk that fills up at each stage,
and a memory cap.

Each stop must be one message naming the stage, the path or the limit and what is needed; nothing
half-written may be left for a later run to trust; and a resume after room is made (the tmpfs
remounted larger, the cgroup's limit raised) must end with the tables of an uninterrupted run,
without answering a prompt twice. The file systems are tmpfs mounts and the limit a memory cgroup
made by the test (root needed: CI and the setup script run as root; elsewhere the tests skip).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import OPENCOMPASS, ROOT

from needlebench.files import verified

pytestmark = pytest.mark.e2e

CONFIG = "tests/configs/e2e_limits.py"
RUN = "20000101_000000"  # the run folder, made by the test so a resume (-r) finds it
ROWS = 12  # the config's prompts: 2 lengths x 3 depths x 2 repeats
CAP = 2 << 30  # the memory cap of the issue: 2 GiB


def _mount(folder: Path, size: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs here (needs root): {r.stderr.decode().strip()}")


def _remount(folder: Path, size: int) -> None:
    """Make room: the same tmpfs, larger, its files kept."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(folder)], check=True)


@contextlib.contextmanager
def _tmpfs_mounts(*folders: tuple[Path, int]) -> Iterator[None]:
    mounted = []
    try:
        for folder, size in folders:
            _mount(folder, size)
            mounted.append(folder)
        yield
    finally:
        for folder in reversed(mounted):
            subprocess.run(["umount", "-l", str(folder)], check=False)


@contextlib.contextmanager
def _memory_cgroup(limit: int) -> Iterator[Path]:
    """A fresh memory cgroup (v2, else v1) with ``limit`` bytes, removed afterwards."""
    base = Path("/sys/fs/cgroup")
    v2 = (base / "cgroup.controllers").exists() and "memory" in (base / "cgroup.controllers").read_text()
    folder = (base if v2 else base / "memory") / f"needlebench-test-{os.getpid()}"
    try:
        folder.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a memory cgroup here (needs root and cgroups): {exc}")
    try:
        _set_limit(folder, limit)
        yield folder
    finally:
        for _ in range(50):
            with contextlib.suppress(OSError):
                folder.rmdir()
                break
            subprocess.run(["sleep", "0.2"], check=False)


def _set_limit(folder: Path, limit: int) -> None:
    (folder / ("memory.max" if (folder / "memory.max").exists() else "memory.limit_in_bytes")).write_text(str(limit))


def _opencompass(work: Path, cache: Path, cgroup: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """``opencompass CONFIG -w work -r RUN`` (inside ``cgroup`` if given); the process, not checked."""
    (work / RUN).mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, "NEEDLEBENCH_CACHE": str(cache), **env}

    def enter() -> None:
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))

    return subprocess.run(
        [*OPENCOMPASS, CONFIG, "-w", str(work), "-r", RUN],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=900,
        preexec_fn=enter,
    )


def _stop_message(proc: subprocess.CompletedProcess[str]) -> str:
    """The one line a stopped run ends with (on stderr), with no traceback before it."""
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("needlebench: "), proc.stderr[-2000:]
    return lines[-1]


def _tables(run: Path) -> dict[str, str]:
    """The run's summary tables: ours, and OpenCompass's ``summary_<time>.csv`` (its name holds the time); the
    ledger and its forecast left out (``needlebench_cost*.csv``: the clock's, and a killed task's last batch has no
    cost line)."""
    tables = {
        p.name: p.read_text(encoding="utf-8")
        for p in (run / "summary").glob("needle*.csv")
        if not p.name.startswith("needlebench_cost")
    }
    *_, newest = sorted((run / "summary").glob("summary_*.csv"))  # one per invocation of a resumed run
    tables["opencompass summary"] = newest.read_text(encoding="utf-8")
    return tables


def _answered(record: Path) -> int:
    return sum(json.loads(line)["prompts"] for line in record.read_text().splitlines()) if record.exists() else 0


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The run with room to spare and under the 2 GiB cap: it completes (every table at 100)."""
    tmp = tmp_path_factory.mktemp("limits_ref")
    with _memory_cgroup(CAP) as cgroup:
        proc = _opencompass(tmp / "work", tmp / "cache", cgroup)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = tmp / "work" / RUN
    tables = _tables(run)
    rows = list(csv.DictReader((run / "summary" / "needlebench_summary.csv").open(encoding="utf-8")))
    assert rows and {float(r["oracle"]) for r in rows} == {100.0} and {r["oracle complete"] for r in rows} == {"True"}
    sizes = {
        "datasets": sum(p.stat().st_size for p in (tmp / "cache" / "datasets").glob("*.arrow")),
        "cache": sum(p.stat().st_size for p in (tmp / "cache").rglob("*") if p.is_file()),
        "predictions": sum(p.stat().st_size for p in (run / "predictions").rglob("*") if p.is_file()),
        "summary": sum(p.stat().st_size for p in (run / "summary").rglob("*") if p.is_file()),
    }
    return {"tables": tables, "sizes": sizes}


def _untrusted_cache_files(cache: Path) -> list[Path]:
    """Cache files a later run would read but that are not verified whole (locks and sidecars aside)."""
    return [
        p
        for p in cache.rglob("*")
        if p.is_file() and p.suffix not in (".lock", ".claim", ".sum") and verified(p) is None
    ]


def _cut_predictions(folder: Path) -> list[Path]:
    """Prediction files OpenCompass would trust though they were cut short."""
    cut = []
    for p in folder.rglob("*.json"):
        try:
            json.loads(p.read_text(encoding="utf-8"))
        except ValueError:
            cut.append(p)
    for p in folder.rglob("tmp_*.jsonl"):
        data = p.read_text(encoding="utf-8")
        if data and not data.endswith("\n"):
            cut.append(p)
    return cut


def test_a_full_disk_stops_each_stage_with_one_message_and_a_resume_gives_the_same_tables(
    uninterrupted: dict, tmp_path: Path
) -> None:
    sizes = uninterrupted["sizes"]
    cache, work = tmp_path / "cache", tmp_path / "work"
    run = work / RUN
    page = 4096
    # room for the corpus token cache and half the dataset file; a quarter of the predictions; a third of the report
    cache_room = (sizes["cache"] - sizes["datasets"] + sizes["datasets"] // 2) // page * page + 8 * page
    roomy = 64 << 20
    with _tmpfs_mounts(
        (cache, cache_room), (run / "predictions", sizes["predictions"] // 4), (run / "summary", sizes["summary"] // 3)
    ):
        # (a) the dataset cache fills up while the partitioner builds the datasets
        message = _stop_message(_opencompass(work, cache))
        assert str(cache / "datasets") in message and "no space left" in message
        assert "bytes written when it filled up" in message and "bytes free" in message
        assert _untrusted_cache_files(cache) == []
        assert not list((run / "predictions").iterdir())  # stopped before any task ran

        # (b) the predictions fill their disk in the infer task; the eval stage stops the run
        _remount(cache, roomy)
        message = _stop_message(_opencompass(work, cache))
        assert message.startswith("needlebench: infer stage stopped: ")
        assert str(run / "predictions" / "oracle") in message and "no space left" in message
        assert "need at least" in message and "bytes are free" in message
        assert not (run / "results").exists() or not list((run / "results").rglob("*.json"))
        # the stage check only reads: a file the full disk cut is left for the resume's infer stage to repair
        cut = _cut_predictions(run / "predictions")

        # (c) the report fills the summary folder
        _remount(run / "predictions", roomy)
        message = _stop_message(_opencompass(work, cache))
        assert _cut_predictions(run / "predictions") == [], cut  # repaired before any task ran again
        assert message.startswith("needlebench: report stage stopped: ")
        assert str(run / "summary") in message and "no space left" in message
        left = [p for p in (run / "summary").rglob("*") if p.is_file()]
        assert not [p for p in left if p.name.startswith(".")], left  # no temporary file left behind
        for p in left:  # what is there was written whole: OpenCompass's table as in the uninterrupted run
            if p.name.startswith("summary_") and p.suffix == ".csv":
                assert p.read_text(encoding="utf-8") == uninterrupted["tables"]["opencompass summary"]

        # room again: the resume finishes with the tables of the uninterrupted run
        _remount(run / "summary", roomy)
        proc = _opencompass(work, cache)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert _tables(run) == uninterrupted["tables"]


def test_a_memory_cap_stops_the_infer_stage_with_one_message_and_a_resume_redoes_nothing(
    uninterrupted: dict, tmp_path: Path
) -> None:
    """The oracle holds 40 kB per prompt token it has answered (a serving engine's KV cache), so its task
    outgrows the 2 GiB cap after a few of the 8k prompts; the kernel kills it (SIGKILL: it says nothing
    itself), and the eval stage names the limit. Raised to 6 GiB, the resume answers only what was left."""
    cache, work, record = tmp_path / "cache", tmp_path / "work", tmp_path / "calls.jsonl"
    env = {"NEEDLEBENCH_TEST_KV_BYTES": "40000", "NEEDLEBENCH_TEST_RECORD": str(record)}
    with _memory_cgroup(CAP) as cgroup:
        message = _stop_message(_opencompass(work, cache, cgroup, **env))
        assert message.startswith("needlebench: infer stage stopped: ")
        assert "killed by the memory limit of 2.00 GiB" in message and str(cgroup) in message
        before = _answered(record)
        assert 0 < before < ROWS  # some prompts were answered before the kill
        assert _cut_predictions(work / RUN / "predictions") == []
        _set_limit(cgroup, 6 << 30)
        proc = _opencompass(work, cache, cgroup, **env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _answered(record) == ROWS  # every prompt answered once: nothing finished was redone
    assert _tables(work / RUN) == uninterrupted["tables"]


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_memory_cgroup_is_read_with_its_limit_and_oom_kills(tmp_path: Path, version: str) -> None:
    """What the summarizer blames a SIGKILL on: the cgroup's limit and its OOM-kill counter, in either layout."""
    from needlebench.cgroups import memory_limit

    root = tmp_path / "cgroup"
    if version == "v1":
        folder = root / "memory" / "jobs" / "run"
        folder.mkdir(parents=True)
        (folder / "memory.limit_in_bytes").write_text(f"{2 << 30}\n")
        (folder / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
        proc = "5:cpu:/\n4:memory:/jobs/run\n0::/\n"
    else:
        folder = root / "jobs" / "run"
        folder.mkdir(parents=True)
        (folder / "memory.max").write_text(f"{2 << 30}\n")
        (folder / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\n")
        proc = "0::/jobs/run\n"
    (tmp_path / "cgroup_list").write_text(proc)
    found = memory_limit(tmp_path / "cgroup_list", root)
    assert found is not None and found.path == folder and found.limit == 2 << 30
    assert found.oom_kills == (3 if version == "v1" else 2)
    (folder / ("memory.limit_in_bytes" if version == "v1" else "memory.max")).write_text(
        "9223372036854771712\n" if version == "v1" else "max\n"
    )
    assert memory_limit(tmp_path / "cgroup_list", root).limit is None  # type: ignore[union-attr]
    (tmp_path / "cgroup_list").write_text("")
    assert memory_limit(tmp_path / "cgroup_list", root) is None
