"""``needlebench status`` and the live view of ``needlebench run``: a run read from its files alone.

The definition on hand-made run folders (rate, ETA, how a live run is told from a stopped one, the counts
against the plan), then real OpenCompass runs against the slow scripted server (``tools/flaky_server.py
--latency``): read half way, the counts match the prediction files and the ETA the time the inference then
took; killed, the printed command finishes the run asking only what was not answered; on a terminal the live
view draws, in a pipe nothing is added.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, bin_path, free_port, start_flaky_server, stop_server

from needlebench.planning.run import ModelRun, Part, RunPlan, Shard
from needlebench.planning.settings import RunSettings
from needlebench.runfolder.plan_file import StoredPlan, write_stored
from needlebench.runfolder.progress_log import PROGRESS_FILE, Step, record_progress
from needlebench.runfolder.status import PID_SLACK, QUIET, WINDOW, StatusReader, elapsed_seconds

CONFIG = "tests/configs/e2e_status.py"
LATENCY = 0.3  # seconds per request: 60 prompts two at a time take about 9 s
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][AB0-2]")


def _plan_folder(run: Path, host: str, pid: int, at: float) -> None:
    """A run folder holding a plan of one model: shard 0 = a[0:10] (1,000 tokens) + b[0:4] (4,000 tokens),
    shard 1 = c[0:6] (600 tokens)."""
    shards = (
        Shard(0, (Part("a", None, 0, 10, 1000), Part("b", None, 0, 4, 4000)), 14, 5000, 140),
        Shard(1, (Part("c", None, 0, 6, 600),), 6, 600, 60),
    )
    plan = RunPlan(RunSettings.of({}), (ModelRun("m", {}, {}, shards),))
    write_stored(
        run, StoredPlan(plan, history=({"stage": "fresh", "request": {}, "at": at, "host": host, "pid": pid},))
    )
    (run / "predictions" / "m").mkdir(parents=True)


def test_counts_rate_and_eta_come_from_the_plan_and_the_progress_log(tmp_path: Path) -> None:
    """a is whole, b half done in its tmp_ log, c never started: done and tokens per the plan's pieces; the
    rate is the tokens answered after the window's first step over the time since it; the ETA is the tokens
    left at that rate."""
    t0 = 1_000_000.0
    _plan_folder(tmp_path, "elsewhere", 1, t0)
    folder = tmp_path / "predictions" / "m"
    (folder / "a.json").write_text(json.dumps({str(i): {} for i in range(10)}, indent=4), encoding="utf-8")
    (folder / "tmp_b.jsonl").write_text('{"1": {}}\n{"2": {}}\n', encoding="utf-8")
    for step in (Step("a", t0 + 1, 0, 0), Step("a", t0 + 6, 10, 10), Step("b", t0 + 7, 0, 0), Step("b", t0 + 11, 2, 2)):
        record_progress(folder, step)
    os.utime(folder / "tmp_b.jsonl", (t0 + 11, t0 + 11))
    os.utime(folder / "a.json", (t0 + 6, t0 + 6))
    (folder / PROGRESS_FILE).open("a").write('{"abbr": "b", "t": ')  # a line a kill cut short: left out

    now = t0 + 21
    status = StatusReader(tmp_path, host="here").read(now)
    (m,) = status.models
    assert [(d.dataset, d.done, d.planned, d.done_tokens, d.planned_tokens) for d in m.datasets] == [
        ("a", 10, 10, 1000, 1000),
        ("b", 2, 4, 2000, 4000),
        ("c", 0, 6, 0, 600),
    ]
    assert status.state == "running" and "a file was written 10 s ago" in status.how  # another host: by its files
    assert status.stage == "infer"
    assert [t.state for t in m.tasks] == ["running", "not started"]
    rate = (10 * 100 + 2 * 1000) / (now - (t0 + 1))  # every step is inside the window
    assert status.rate == pytest.approx(rate) and m.rate == pytest.approx(rate)
    assert status.eta_s == pytest.approx((2000 + 600) / rate)
    assert status.commands == ()  # running: nothing to finish by hand

    stopped = StatusReader(tmp_path, host="here").read(t0 + 11 + QUIET + 1)
    assert stopped.state == "stopped" and stopped.eta_s is None
    assert stopped.rate == pytest.approx(3000 / 10)  # the rate of its last minutes: up to its last step
    assert [t.state for t in stopped.models[0].tasks] == ["stopped", "not started"]
    assert stopped.left() == [
        "m / a: not scored",
        "m / b: 2 of 4 samples to predict, not scored",
        "m / c: 6 of 6 samples to predict, not scored",
    ]
    assert stopped.commands == ()  # no stored config: no command to print rather than a wrong one
    assert WINDOW < QUIET


def test_a_run_of_this_host_is_live_while_its_process_is(tmp_path: Path) -> None:
    """The plan names the stage's process: alive (this test's) is running, a process that ended is stopped
    at once, whatever the files' times."""
    import socket

    ended = subprocess.Popen(["true"])
    ended.wait()
    for pid, state in ((os.getpid(), "running"), (ended.pid, "stopped")):
        run = tmp_path / str(pid)
        run.mkdir()
        _plan_folder(run, socket.gethostname(), pid, time.time())
        (run / "configs").mkdir()
        (run / "configs" / "20261205_000000_1.py").write_text("models = []\n", encoding="utf-8")
        status = StatusReader(run).read()
        assert status.state == state, status.how
        assert f"process {pid}" in status.how
    assert status.commands == (f"needlebench run {run}/configs/20261205_000000_1.py -w {tmp_path} -r {run.name}",)


def test_a_reused_process_id_is_not_the_run(tmp_path: Path) -> None:
    """A live process whose id the plan names but that started after the stage did (more than PID_SLACK) holds
    a reused id: the run is stopped, and said so. The same process named by a stage that began after it started
    is the run."""
    import socket

    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        for at, state in ((time.time() - 10 * PID_SLACK, "stopped"), (time.time() + 1, "running")):
            run = tmp_path / str(round(at))
            run.mkdir()
            _plan_folder(run, socket.gethostname(), sleeper.pid, at)
            status = StatusReader(run).read()
            assert status.state == state, status.how
            if state == "stopped":
                assert status.how.startswith(f"process {sleeper.pid} on {socket.gethostname()} has ended: ")
                assert status.how.endswith(" s after the stage (the pid was reused)"), status.how
            else:
                assert status.how == f"process {sleeper.pid} on {socket.gethostname()} is running it"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_ps_elapsed_time_is_read_in_seconds() -> None:
    """Where there is no /proc, a process's start is now less ``ps -o etime=``'s ``[[dd-]hh:]mm:ss``."""
    assert [elapsed_seconds(t) for t in (" 01:02\n", "03:04:05", "1-02:03:04", "", "n/a")] == [
        62,
        11045,
        93784,
        None,
        None,
    ]


def test_an_eval_stage_is_in_the_history_and_reads_running_while_its_process_lives(tmp_path: Path) -> None:
    """``start_eval`` adds its stage to the plan's history (this process, this host, now): an eval started on
    its own reads running while it lives; the infer stage it follows (its process ended) still dates the tasks."""
    import logging
    import socket

    from needlebench.runfolder.lifecycle import start_eval
    from needlebench.runfolder.plan_file import read_stored

    ended = subprocess.Popen(["true"])
    ended.wait()
    _plan_folder(tmp_path, socket.gethostname(), ended.pid, 1_000_000.0)
    assert StatusReader(tmp_path).read().state == "stopped"
    before = time.time()
    assert start_eval(tmp_path, [], RunSettings.of({}), logging.getLogger("test")) == []
    stored = read_stored(tmp_path)
    assert stored is not None and [h["stage"] for h in stored.history] == ["fresh", "eval"]
    entry = stored.history[-1]
    assert {k: entry[k] for k in ("request", "host", "pid")} == {
        "request": {},
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }
    assert before - 0.001 <= entry["at"] <= time.time()
    status = StatusReader(tmp_path).read()
    assert (
        status.state == "running"
        and status.how == f"process {os.getpid()} on {socket.gethostname()} is running its eval stage"
    )
    assert status.started == 1_000_000.0  # the infer stage's start, not the eval's


def test_a_folder_that_is_not_a_run_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in ([str(tmp_path)], [str(tmp_path / "nothing")], [str(tmp_path), "--interval", "0"]):
        r = subprocess.run([bin_path("needlebench"), "status", *args], capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 2 and r.stdout == "", r
        assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("needlebench: error: status:"), r.stderr


# ---- real runs


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    log = tmp_path_factory.mktemp("slow") / "requests.jsonl"
    port = free_port()
    server = start_flaky_server(
        port, log, "--never-every", "0", "--faults-per-prompt", "0", "--echo", "--latency", str(LATENCY)
    )
    yield port, log
    stop_server(server)


def _env(port: int) -> dict[str, str]:
    path = os.pathsep.join([str(Path(bin_path("needlebench")).parent), os.environ.get("PATH", "")])
    return {**os.environ, "NEEDLEBENCH_API_BASE": f"http://127.0.0.1:{port}/v1", "PATH": path}


def _status_json(path: Path) -> dict:
    r = subprocess.run([bin_path("needlebench"), "status", str(path), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _wait_for(work: Path, done: float, proc: subprocess.Popen) -> Path:
    """Wait until the run in ``work`` has predicted ``done`` of its samples (read in-process); its folder."""
    deadline = time.time() + 300
    while time.time() < deadline:
        assert proc.poll() is None, "the run ended before it was read"
        runs = [p for p in work.iterdir() if (p / "needlebench_plan.json").is_file()] if work.is_dir() else []
        if runs:
            status = StatusReader(runs[0]).read()
            if status.total("done") >= done * status.total("planned"):
                return runs[0]
        time.sleep(0.1)
    pytest.fail("the run did not get there in 300 s")


def _from_files(run: Path) -> dict[str, int]:
    """Per dataset, the samples its prediction file or tmp_ log holds (one piece per dataset here)."""
    out = {}
    for abbr in ("needlebench_srt_en_4k", "needlebench_srt_zh_4k"):
        final, log = (
            run / "predictions" / "slow-api" / f"{abbr}.json",
            run / "predictions" / "slow-api" / f"tmp_{abbr}.jsonl",
        )
        if final.is_file():
            out[abbr] = len(json.loads(final.read_text(encoding="utf-8")))
        else:
            out[abbr] = log.read_bytes().count(b"\n") if log.is_file() else 0
    return out


def _done(status: dict) -> dict[str, int]:
    return {d["dataset"]: d["done"] for m in status["models"] for d in m["datasets"]}


def test_a_running_run_read_half_way_matches_its_files_and_its_eta_holds_and_the_live_view_draws(
    slow_server: tuple[int, Path], tmp_path: Path
) -> None:
    port, _ = slow_server
    work = tmp_path / "work"
    master, slave = pty.openpty()  # needlebench run on a terminal
    proc = subprocess.Popen(
        [bin_path("needlebench"), "run", CONFIG, "-w", str(work)],
        cwd=ROOT,
        env=_env(port),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    screen = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            screen.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        run = _wait_for(work, 0.5, proc)
        before = _from_files(run)
        t0 = time.time()
        half = _status_json(work)  # the work dir alone: its newest run
        after = _from_files(run)
        assert half["run"] == str(run) and half["state"] == "running" and half["stage"] == "infer"
        assert all(before[k] <= n <= after[k] for k, n in _done(half).items()), (before, _done(half), after)
        assert half["planned"] == 60 and half["tasks_by_state"] == {"running": 1}
        assert half["rate"] > 0 and half["eta_s"] > 0
        infer = StatusReader(run)
        while infer.read().stage == "infer":
            assert proc.poll() is None
            time.sleep(0.05)
        took = time.time() - t0
        assert 0.5 <= half["eta_s"] / took <= 2, (half["eta_s"], took)
        assert proc.wait(timeout=300) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        reader.join(timeout=10)
        os.close(master)
    final = _status_json(run)
    assert final["state"] == "finished" and final["stage"] == "done" and final["commands"] == []
    assert _done(final) == _from_files(run) == {"needlebench_srt_en_4k": 30, "needlebench_srt_zh_4k": 30}
    assert final["tasks_by_state"] == {"finished": 1} and final["left"] == []
    text = ANSI.sub("", screen.decode("utf-8", "replace"))
    assert "needlebench running" in text and "slow-api" in text and "prompt tokens/s" in text, text[-3000:]
    assert "spent by slow-api: " in text, text[-3000:]  # what its requests cost so far, drawn on the terminal too


def test_a_killed_run_lists_what_is_left_and_the_printed_command_finishes_it(
    slow_server: tuple[int, Path], tmp_path: Path
) -> None:
    port, log = slow_server
    work = tmp_path / "work"
    proc = subprocess.Popen(
        [bin_path("needlebench"), "run", CONFIG, "-w", str(work)],
        cwd=ROOT,
        env=_env(port),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    run = _wait_for(work, 0.3, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its task, as a cancelled job or a crash leaves them
    output = proc.communicate(timeout=60)[0].decode("utf-8", "replace")
    assert "needlebench running" not in output and "prompt tokens/s" not in output  # a pipe: nothing added
    time.sleep(2 * LATENCY)  # the requests in flight when it died reach the server's log
    asked_before = log.read_bytes().count(b"\n")

    status = _status_json(run)
    left = 60 - status["done"]
    assert status["state"] == "stopped" and status["stage"] == "infer" and 0 < left < 60
    assert _done(status) == _from_files(run)
    assert status["left"] and all("not scored" in line for line in status["left"])
    text = subprocess.run([bin_path("needlebench"), "status", str(run)], capture_output=True, text=True).stdout
    assert "needlebench stopped" in text and "left:" in text and "to finish: needlebench run" in text, text
    (command,) = status["commands"]
    assert command in text.replace("\n", "")
    done = subprocess.run(command, shell=True, cwd=ROOT, env=_env(port), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    asked_after = log.read_bytes().count(b"\n") - asked_before
    assert asked_after == left  # only what no file held was asked: nothing answered twice

    final = _status_json(run)
    assert final["state"] == "finished" and final["done"] == 60 and final["commands"] == []
    for abbr in ("needlebench_srt_en_4k", "needlebench_srt_zh_4k"):
        result = json.loads((run / "results" / "slow-api" / f"{abbr}.json").read_text(encoding="utf-8"))
        assert result["score"] == 100, result  # every echo answer, before and after the kill, counted right
