"""The suites through OpenCompass's SlurmRunner on a real one-node Slurm cluster.

``tools/slurm_local.sh up --gpus 2`` starts munged, slurmctld and slurmd here (installing Debian's
slurm-wlm if needed) with two test GPUs; every job below is a real ``srun`` of OpenCompass's own
task scripts. One LocalRunner run of the same config is the baseline every Slurm run must match.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import ROOT, bin_path, run_opencompass

pytestmark = pytest.mark.e2e

CONFIG = "tests/configs/slurm_oracle.py"
SCRIPT = ROOT / "tools" / "slurm_local.sh"
STATE = Path(os.environ.get("NB_SLURM_STATE", ROOT / ".cache" / "slurm"))
# OpenCompass's SlurmRunner logs each srun command at DEBUG level only; `--debug` would also make it run tasks
# one by one, so the runs here raise the log level. And its random wait of 0-10 s before each srun (a courtesy to
# a shared scheduler, in `_launch`) is taken out: on this one-node cluster it was about 80 s of idle core per test
# run (two stages, each task's srun, and a retry's); nothing here depends on when a job is submitted.
OPENCOMPASS_WITH_DEBUG_LOG = """
import logging, sys
from opencompass.utils import get_logger
logger = get_logger()
logger.setLevel(logging.DEBUG)
for handler in logger.handlers:
    handler.setLevel(logging.DEBUG)
import opencompass.runners.slurm as slurm
class NoWait:
    @staticmethod
    def randint(low, high):
        return low
slurm.random = NoWait()  # its one use: the wait before each srun
from opencompass.cli.main import main
sys.exit(main())
"""
WALL: dict[str, float] = {}  # run -> seconds, printed at the end of the module


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root: tools/slurm_local.sh installs slurm-wlm and starts the Slurm daemons"
    if not (shutil.which("slurmctld") or shutil.which("apt-get")):
        return "needs slurm-wlm installed, or Debian's apt-get to install it"
    return None


def _slurm_local(*args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """The one-node cluster with two test GPUs, for this module; stopped at its end."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    _slurm_local("up", "--gpus", "2")
    yield
    _slurm_local("down")
    print("\nwall times (s): " + ", ".join(f"{k} {v:.1f}" for k, v in WALL.items()))


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The baseline: the same config through LocalRunner."""
    start = time.time()
    run = run_opencompass(CONFIG, tmp_path_factory.mktemp("local"), env=_env(NB_RUNNER="LocalRunner"))
    WALL["LocalRunner"] = time.time() - start
    return run


def _env(**values: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(values)
    return env


class Queue(threading.Thread):
    """``squeue`` every 0.2 s while a run goes on: what Slurm was asked for, and when jobs waited.

    ``on_poll`` sees each snapshot (rows of job id, name, state, reason, gres) and may act on it.
    """

    def __init__(self, on_poll: Callable[[list[tuple[str, ...]]], None] | None = None) -> None:
        super().__init__(daemon=True)
        self.snapshots: list[list[tuple[str, ...]]] = []
        self.on_poll = on_poll
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            out = subprocess.run(["squeue", "-h", "-o", "%i|%j|%T|%r|%b"], capture_output=True, text=True).stdout
            rows = [tuple(line.split("|")) for line in out.splitlines() if line.strip()]
            self.snapshots.append(rows)
            if self.on_poll:
                self.on_poll(rows)
            time.sleep(0.2)

    def __enter__(self) -> Queue:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join()


def _opencompass(work: Path, env: dict[str, str], *args: str) -> subprocess.Popen:
    work.mkdir(parents=True, exist_ok=True)
    log = open(work / f"opencompass{len(list(work.glob('opencompass*.log')))}.log", "w", encoding="utf-8")
    return subprocess.Popen(
        [sys.executable, "-c", OPENCOMPASS_WITH_DEBUG_LOG, CONFIG, "-w", str(work), *args],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _finish(proc: subprocess.Popen, work: Path) -> tuple[int, str]:
    """(exit code, the run's log) once it ends."""
    code = proc.wait(timeout=900)
    log = max(work.glob("opencompass*.log"), key=lambda p: p.stat().st_mtime)
    return code, log.read_text(encoding="utf-8", errors="replace")


def _commands(log: str) -> list[str]:
    """The srun commands SlurmRunner logged."""
    return re.findall(r"Running command: (srun .*)", log)


def _job_name(command: str) -> str:
    return re.search(r"-J '([^']*)'", command).group(1)  # type: ignore[union-attr]


def _summary(run: Path) -> str:
    return (run / "summary" / "needlebench_summary.csv").read_text(encoding="utf-8")


def _assert_oracle_perfect(run: Path) -> None:
    table = list(csv.DictReader((run / "summary" / "needlebench_summary.csv").open(encoding="utf-8")))
    assert table and all(float(r["oracle"]) == 100.0 and r["oracle complete"] == "True" for r in table)


def _status_view(path: Path) -> dict:
    """``needlebench status PATH --json`` less what differs between two runs of one plan (folder, times, rate,
    what the clock said each request cost, and the GPUs each task held: 2 under Slurm, none locally)."""
    r = subprocess.run([bin_path("needlebench"), "status", str(path), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    view = json.loads(r.stdout)
    for key in ("run", "how", "started", "last_write", "now", "rate", "eta_s", "commands"):
        view.pop(key)
    for model in view["models"]:
        for key in ("rate", "spent", "devices"):
            model.pop(key)
    return view


def _planned_predictions(run: Path) -> list[Path]:
    """The prediction files of every piece the run's stored plan holds (3 shards)."""
    from needlebench.runfolder.plan_file import read_plan

    plan = read_plan(run)
    assert plan is not None
    return [run / "predictions" / "oracle" / f"{p.abbr}.json" for s in plan.models[0].shards for p in s.parts]


# -- the cluster script and the preflight -------------------------------------------------------------


def test_slurm_local_is_idempotent_and_reconfigures(cluster: None) -> None:
    before = (STATE / "pids").read_text()
    assert "already up" in _slurm_local("up", "--gpus", "2").stdout
    assert (STATE / "pids").read_text() == before  # nothing restarted
    _slurm_local("up", "--gpus", "1")  # another GPU count: its own daemons restarted with the new config
    assert subprocess.run(["sinfo", "-h", "-o", "%G"], capture_output=True, text=True).stdout.strip() == "gpu:1"
    _slurm_local("up", "--gpus", "2")
    assert subprocess.run(["sinfo", "-h", "-o", "%G"], capture_output=True, text=True).stdout.strip() == "gpu:2"
    assert "slurmctld" in _slurm_local("status").stdout


def test_preflight_without_slurm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No srun on PATH: one message; reading a Slurm config still works (export needs no Slurm)."""
    from needlebench.errors import ConfigError
    from needlebench.opencompass.configs import runtime
    from needlebench.preflight.slurm import check_slurm

    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match=r"Slurm is not installed here \(srun, sinfo not on PATH\).*Nothing was"):
        check_slurm("debug")
    infer, _ = runtime(runner="SlurmRunner", partition="nosuch", num_shards=3)
    assert infer["runner"]["partition"] == "nosuch"


def _wait_gone(pid: int, seconds: float = 30) -> None:
    """Until the process has exited (gone, or a zombie nobody reaps here)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/status").read_text().count("State:\tZ"):
                return
        except FileNotFoundError:
            return
        time.sleep(0.05)
    pytest.fail(f"process {pid} still runs {seconds:.0f} s after SIGTERM")


def test_preflight_with_munge_down(cluster: None) -> None:
    """munged stopped: one message naming munge; the script's `up` brings the cluster back."""
    from needlebench.errors import ConfigError
    from needlebench.preflight.slurm import check_slurm

    pids = dict(line.split() for line in (STATE / "pids").read_text().splitlines())
    if "munged" not in pids:
        pytest.skip("munged was not started by tools/slurm_local.sh; not stopping someone else's")
    check_slurm("debug")
    os.kill(int(pids["munged"]), 15)
    _wait_gone(int(pids["munged"]))
    try:
        with pytest.raises(ConfigError, match=r"munge does not work: start munged.*Nothing was submitted"):
            check_slurm("debug")
    finally:
        _slurm_local("up", "--gpus", "2")
    check_slurm("debug")


def test_unknown_partition_is_one_message_and_no_job(cluster: None, tmp_path: Path) -> None:
    def probe() -> int:  # job ids only grow: a probe job before and after shows nothing was submitted
        r = subprocess.run(
            ["sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true"], capture_output=True, text=True
        )
        assert r.returncode == 0, r.stderr
        return int(r.stdout.strip().split(";")[0])

    first = probe()
    r = subprocess.run(
        [sys.executable, "-m", "opencompass.cli.main", CONFIG, "-w", str(tmp_path)],
        cwd=ROOT,
        env=_env(NB_PARTITION="nosuch"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = r.stdout + r.stderr
    assert r.returncode != 0
    message = "partition 'nosuch' does not exist on this cluster; it has ['debug']"
    assert output.count(message) == 1, output[-3000:]
    assert probe() == first + 1
    assert not list(tmp_path.glob("*/predictions/*/*"))


# -- end to end ----------------------------------------------------------------------------------------


def test_slurm_run_with_two_gpus_per_job_matches_local(cluster: None, local: Path, tmp_path: Path) -> None:
    """3 shards of a tp=2 model: 3 srun jobs of gpu:2 each, one at a time on the node's two GPUs; the
    summary is the LocalRunner run's, oracle 100 everywhere."""
    record = tmp_path / "record.jsonl"
    work = tmp_path / "work"
    start = time.time()
    with Queue() as queue:
        code, log = _finish(_opencompass(work, _env(NB_GPUS="2", NB_DELAY="1", NB_RECORD=str(record))), work)
    WALL["SlurmRunner (gpu:2 jobs)"] = time.time() - start
    assert code == 0, log[-3000:]
    (run,) = [p for p in work.iterdir() if p.is_dir()]
    assert _summary(run) == _summary(local)
    _assert_oracle_perfect(run)
    # the plan the Slurm run stored is the one `needlebench plan` makes of the same config
    from needlebench.commands.plan import plan_config
    from needlebench.runfolder.plan_file import read_plan

    planned = plan_config(str(ROOT / CONFIG))
    assert read_plan(run) == planned.run
    # needlebench status from the shared work dir alone (as on a login node) shows what the local run's shows
    slurm_view, local_view = _status_view(work), _status_view(local)
    assert slurm_view == local_view and slurm_view["state"] == "finished", slurm_view
    assert slurm_view["done"] == slurm_view["planned"] == sum(m.samples for m in planned.models), slurm_view

    commands = _commands(log)
    infer = [c for c in commands if "OpenICLInfer[" in c]
    evals = [c for c in commands if "OpenICLEval[" in c]
    assert len(infer) == 3 and len(evals) == 2, commands
    assert all(c.startswith("srun -p debug --gres=gpu:2 ") for c in infer), infer
    assert all("--gres" not in c for c in evals), evals  # evaluation needs no GPU
    # every inference job got two devices, and its name is the one OpenCompass gave srun
    calls = [json.loads(x) for x in record.read_text().splitlines()]
    jobs = {c["job"]: c for c in calls}
    assert len(jobs) == 3 and {c["name"] for c in jobs.values()} == {_job_name(c) for c in infer}
    assert all(len(c["cuda"].split(",")) == 2 for c in calls), calls
    # what Slurm was asked for, and that the jobs queued for the GPUs: never two running at once
    seen = [row for snap in queue.snapshots for row in snap if row[1].startswith("OpenICLInfer[")]
    assert seen and all(row[4] == "gres:gpu:2" for row in seen), seen
    assert (
        max(sum(r[2] == "RUNNING" for r in snap if r[1].startswith("OpenICLInfer[")) for snap in queue.snapshots) == 1
    )
    assert any(row[2] == "PENDING" and row[3] == "Resources" for row in seen), seen


def test_cancelled_shard_is_rerun_by_resume(cluster: None, local: Path, tmp_path: Path) -> None:
    """scancel one running shard's job; `opencompass -r` reruns that shard only and loses nothing."""
    work = tmp_path / "work"
    cancelled: list[tuple[str, str]] = []  # (job id, job name)

    def cancel_first_running_shard(rows: list[tuple[str, ...]]) -> None:
        if cancelled:
            return
        for job, name, state, *_ in rows:
            if name.startswith("OpenICLInfer[") and state == "RUNNING":
                subprocess.run(["scancel", job], check=True)
                cancelled.append((job, name))
                return

    env = _env()
    start = time.time()
    with Queue(cancel_first_running_shard):
        code, first_log = _finish(_opencompass(work, env), work)
    WALL["SlurmRunner (cancelled run)"] = time.time() - start
    assert cancelled, "no inference job was seen running"
    (run,) = [p for p in work.iterdir() if p.is_dir()]
    planned = _planned_predictions(run)
    assert not all(p.exists() for p in planned)  # the cancel took: a shard's predictions are missing

    start = time.time()
    code, resume_log = _finish(_opencompass(work, env, "-r", run.name), work)
    WALL["SlurmRunner (resume)"] = time.time() - start
    assert code == 0, resume_log[-3000:]
    missing = [p.name for p in planned if not p.exists()]
    assert not missing, missing
    # only the cancelled shard ran again; no job of either run asked for a GPU (the model has num_gpus=0)
    rerun = [_job_name(c) for c in _commands(resume_log) if "OpenICLInfer[" in c]
    assert rerun == [cancelled[0][1]], (rerun, cancelled)
    assert all("--gres" not in c for c in _commands(first_log) + _commands(resume_log))
    assert _summary(run) == _summary(local)
    _assert_oracle_perfect(run)
