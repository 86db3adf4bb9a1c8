"""Bad input to ``retry``, ``batch``, ``parity`` and ``plan --prices``: one line naming what is wrong, exit
status 2, and every file of the folders it names as it was (no traceback, no half-written file, nothing started).
And the good ``retry`` the same run calls for.

One real run serves every case: ``tests/configs/e2e_retry.py`` against the scripted server with some prompts
failing every time, so ``api-model`` ends with failed requests and ``oracle`` with none. The cases that need
another version's run, or prepared batch files, get a copy of it changed as such a run would be; the retry
fills a copy of its own.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest
from conftest import OPENCOMPASS, ROOT, bin_path, free_port, start_flaky_server, stop_server

from needlebench.commands.cli import main
from needlebench.parity import CORPUS_FILES
from needlebench.runfolder.plan_file import PLAN_FILE
from needlebench.runfolder.provider_batch import batch_line
from needlebench.sample import DATASET_VERSION
from needlebench.tasks.sparse.alignment import LOADER_FILES

Listing = dict[str, tuple[int, str]]


def listing(folder: Path) -> Listing:
    """Every file under ``folder``: its path, size and SHA-256 (empty where the folder does not exist)."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def refused(argv: list[str], watched: Path, capsys: pytest.CaptureFixture, *names: str) -> str:
    """Run the command in this process: it must exit 2 with one stderr line naming each of ``names``, print
    nothing else, and leave every file under ``watched`` as it was; its line, returned."""
    before = listing(watched)
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert out == "" and err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("needlebench: error: ")
    for name in names:
        assert str(name) in err, (name, err)
    assert listing(watched) == before
    return err


class FailedRun(NamedTuple):
    """The run every case starts from, the port its server listened on, and what the run printed."""

    folder: Path
    port: int
    said: str


FLAKY = ("--faults-per-prompt", "0", "--max-seconds", "600", "--echo")  # the scripted server, answering the prompt


def served(port: int, log: Path, argv: list[str], *options: str) -> subprocess.CompletedProcess:
    """``argv`` run from the repository root against the scripted server on ``port`` (with ``options``), which
    stops after it; the command must succeed.

    Args:
        port: the server's port (the run's config reads it from ``$NEEDLEBENCH_API_BASE``).
        log: where the server writes each request.
        argv: the command.
        options: the server's own options (``--never-every``).
    """
    server = start_flaky_server(port, log, *FLAKY, *options)
    try:
        env = dict(os.environ, NEEDLEBENCH_API_BASE=f"http://127.0.0.1:{port}/v1")
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    finally:
        stop_server(server)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory: pytest.TempPathFactory) -> FailedRun:
    """A finished run whose API model left requests failed (its oracle none): every third prompt fails every time."""
    tmp = tmp_path_factory.mktemp("errors")
    port, work = free_port(), tmp / "work"
    argv = [*OPENCOMPASS, "tests/configs/e2e_retry.py", "-w", str(work)]
    done = served(port, tmp / "requests.jsonl", argv, "--never-every", "3")
    (found,) = [p for p in work.iterdir() if p.is_dir()]
    assert any('"request_failed"' in p.read_text() for p in (found / "results" / "api-model").glob("*.samples.jsonl"))
    return FailedRun(found, port, done.stdout + done.stderr)


@pytest.fixture(scope="module")
def run(failed_run: FailedRun) -> Path:
    """The failed run's folder (each case that changes it works on a copy)."""
    return failed_run.folder


@pytest.fixture()
def api_base(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's stored config reads the server's address when loaded; nothing listens there."""
    monkeypatch.setenv("NEEDLEBENCH_API_BASE", f"http://127.0.0.1:{free_port()}/v1")


def copy_run(run: Path, tmp: Path) -> Path:
    """A copy of the run in its own work dir (the case changes it; the run stays for the others)."""
    target = tmp / "work" / run.name
    shutil.copytree(run, target)
    return target


def older_records(run: Path, tmp: Path) -> Path:
    """The run as another dataset version wrote it: its graded samples carry another ``version``."""
    copy = copy_run(run, tmp)
    path = copy / "results" / "api-model" / "needlebench_srt_en_4k.samples.jsonl"
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    path.write_text("".join(json.dumps({**r, "version": "3.0"}) + "\n" for r in rows), encoding="utf-8")
    return copy


def plan_of_another_version(change: Callable[[dict], object]) -> Callable[[Path, Path], Path]:
    """The run as a version with another plan format wrote it: its stored plan changed by ``change``."""

    def setup(run: Path, tmp: Path) -> Path:
        copy = copy_run(run, tmp)
        plan = json.loads((copy / PLAN_FILE).read_text(encoding="utf-8"))
        change(plan)
        (copy / PLAN_FILE).write_text(json.dumps(plan), encoding="utf-8")
        return copy

    return setup


def prepared(run: Path, tmp: Path) -> Path:
    """The run after ``batch prepare``: its failed requests as batch lines, ``custom_id`` the sample id."""
    copy = copy_run(run, tmp)
    for path in sorted((copy / "results" / "api-model").glob("*.samples.jsonl")):
        rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
        failed = [r for r in rows if r["unscored"] == "request_failed"]
        out = copy / "batch" / "api-model" / path.name.replace(".samples", "")
        out.parent.mkdir(parents=True, exist_ok=True)
        body = {"model": "flaky", "max_tokens": 16}
        out.write_text("".join(batch_line(r["id"], {**body, "messages": [r["id"]]}) for r in failed), encoding="utf-8")
    return copy


def results_file(path: Path, ids: list[str]) -> None:
    """An OpenAI Batch output file answering these ids."""
    lines = [{"custom_id": i, "response": {"status_code": 200, "body": {}}, "error": None} for i in ids]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def with_results(make: Callable[[Path, Path], Path]) -> Callable[[Path, Path], Path]:
    """``make``, and beside it in ``tmp`` a results file of another run's sample and an empty one."""

    def setup(run: Path, tmp: Path) -> Path:
        results_file(tmp / "other.jsonl", ["srt-en-1000-50-9-00000000"])
        results_file(tmp / "empty.jsonl", [])
        return make(run, tmp)

    return setup


def data_folder(leave_out: str = "", empty: str = "") -> Callable[[Path, Path], Path]:
    """A NeedleBench data folder with every file the v1 suites read (stand-in bodies: the checks refuse
    before anything parses them), less ``leave_out``, with ``empty`` empty."""

    def setup(_: Path, tmp: Path) -> Path:
        folder = tmp / "needlebench"
        folder.mkdir()
        for name in (*CORPUS_FILES, *{f for files in LOADER_FILES.values() for f in files}):
            if name != leave_out:
                (folder / name).write_text("" if name == empty else '{"text": "x"}\n', encoding="utf-8")
        (tmp / "a_file").write_text("kept\n", encoding="utf-8")
        return folder

    return setup


# what a case starts from: (the run, tmp_path) -> the folder it names as {run}, whose files must stay as they were
SETUPS: dict[str, Callable[[Path, Path], Path]] = {
    "the run": lambda run, tmp: run,
    "nothing": lambda run, tmp: tmp,
    "another dataset version": older_records,
    # an older format: its models were not yet cut in shards; a newer one: a field this package does not know
    "an older plan": plan_of_another_version(lambda plan: plan["models"][0].pop("shards")),
    "a newer plan": plan_of_another_version(lambda plan: plan["models"][1].update(kv_press="snapkv")),
    "prepared": with_results(prepared),
    "not prepared": with_results(lambda run, tmp: run),
    "data": data_folder(),
    "data without needles.jsonl": data_folder(leave_out="needles.jsonl"),
    "data with an empty zh_finance.jsonl": data_folder(empty="zh_finance.jsonl"),
}

# per command, each case: (its setup, the arguments, what the one line must name); {run} (the setup's folder),
# {work} (its parent), {name} (its name) and {tmp} are filled in
Cases = dict[str, tuple[str, list[str], list[str]]]

RETRY: Cases = {
    "no such path": ("nothing", ["retry", "{tmp}/nowhere"], ["no such run folder {tmp}/nowhere"]),
    "not a run": ("the run", ["retry", "{run}/results"], ["{run}/results holds no configs/*.py"]),
    "a work dir": ("the run", ["retry", "{work}"], ["{work} is a work dir", "{work}/{name}"]),
    "nothing failed": ("the run", ["retry", "{run}", "--model", "oracle"], ["{run} has no failed requests of oracle"]),
    "an unknown model": ("the run", ["retry", "{run}", "--model", "gpt-x"], ["['gpt-x']", "['api-model', 'oracle']"]),
    "another dataset version": (
        "another dataset version",
        ["retry", "{run}"],
        ["{run}/results/api-model/needlebench_srt_en_4k.samples.jsonl:1", "version 3.0", f"makes {DATASET_VERSION}"],
    ),
    "an older plan": ("an older plan", ["retry", "{run}"], [f"{{run}}/{PLAN_FILE} is not a plan", "'shards'"]),
    "a newer plan": ("a newer plan", ["retry", "{run}"], [f"{{run}}/{PLAN_FILE} is not a plan", "models.1.kv_press"]),
}

BATCH: Cases = {
    "prepare: no such config": (
        "nothing",
        ["batch", "prepare", "{tmp}/eval.py", "-w", "{tmp}/w"],
        ["no such config file or run folder {tmp}/eval.py"],
    ),
    "prepare: another version's run": ("another dataset version", ["batch", "prepare", "{run}"], ["version 3.0"]),
    "collect: no prepared table": (
        "not prepared",
        ["batch", "collect", "{run}", "{tmp}/other.jsonl"],
        ["{run}/batch holds no prepared files"],
    ),
    "collect: a missing results file": (
        "prepared",
        ["batch", "collect", "{run}", "{tmp}/out.jsonl"],
        ["no such file {tmp}/out.jsonl"],
    ),
    "collect: another run's results": (
        "prepared",
        ["batch", "collect", "{run}", "{tmp}/other.jsonl"],
        ["{tmp}/other.jsonl answers none of the 5 requests prepared in {run}/batch/api-model"],
    ),
    "collect: an empty results file": (
        "prepared",
        ["batch", "collect", "{run}", "{tmp}/empty.jsonl"],
        ["{tmp}/empty.jsonl holds no result lines"],
    ),
}

PARITY: Cases = {
    "no such folder": ("nothing", ["parity", "{tmp}/data"], ["data: {tmp}/data is not a folder"]),
    "a file left out": (
        "data without needles.jsonl",
        ["parity", "{run}", "-o", "{tmp}/out"],
        ["data: {run} lacks needles.jsonl"],
    ),
    "an empty file": (
        "data with an empty zh_finance.jsonl",
        ["parity", "{run}", "-o", "{tmp}/out"],
        ["data: {run}/zh_finance.jsonl is empty"],
    ),
    "an unknown suite": ("data", ["parity", "{run}", "--suite", "64k", "-o", "{tmp}/out"], ["unknown suite '64k'"]),
    "an output that is a file": (
        "data",
        ["parity", "{run}", "-o", "{tmp}/a_file"],
        ["--output: {tmp}/a_file is a file"],
    ),
}


def check_case(cases: Cases, case: str, run: Path, tmp: Path, capsys: pytest.CaptureFixture) -> None:
    """Set the case up, fill in its folders, and see it refused (:func:`refused`)."""
    setup, argv, names = cases[case]
    folder = SETUPS[setup](run, tmp)
    fill = {"run": str(folder), "tmp": str(tmp), "work": str(folder.parent), "name": folder.name}
    refused([a.format(**fill) for a in argv], folder, capsys, *(n.format(**fill) for n in names))


@pytest.mark.e2e
@pytest.mark.parametrize("case", list(RETRY))
def test_retry_refuses_bad_input(
    run: Path, tmp_path: Path, case: str, api_base: None, capsys: pytest.CaptureFixture
) -> None:
    """Nothing asked again, nothing started: a path that is no run, a run with nothing failed (of the model
    named), a model it does not have, a run another version made (its samples or its plan)."""
    check_case(RETRY, case, run, tmp_path, capsys)


@pytest.mark.e2e
@pytest.mark.parametrize("case", list(BATCH))
def test_batch_refuses_bad_input(
    run: Path, tmp_path: Path, case: str, api_base: None, capsys: pytest.CaptureFixture
) -> None:
    """Nothing collected, nothing recorded ``request_failed``, no OpenCompass started: a missing config or
    results file, a run of another version, a run with nothing prepared, results of another run or none."""
    check_case(BATCH, case, run, tmp_path, capsys)


def _api_samples(run: Path) -> list[dict]:
    """The API model's graded samples, English then Chinese."""
    return [
        json.loads(x)
        for lang in ("en", "zh")
        for x in (run / "results" / "api-model" / f"needlebench_srt_{lang}_4k.samples.jsonl").read_text().splitlines()
    ]


@pytest.mark.e2e
def test_a_retry_asks_only_what_failed_and_keeps_every_other_file(failed_run: FailedRun, tmp_path: Path) -> None:
    """Some prompts failed until the run ended: they stay request_failed, and the run says how to ask them again;
    `needlebench retry` against the healthy server fills exactly those, every other prediction file byte for
    byte as it was (the oracle's all), and the summary becomes complete."""
    assert f"needlebench retry {failed_run.folder}" in failed_run.said
    run = copy_run(failed_run.folder, tmp_path)  # the stored config still names the run's server
    failed = [s["id"] for s in _api_samples(run) if s["unscored"] == "request_failed"]
    assert failed and len(failed) < 12
    before = {p: p.read_bytes() for p in (run / "predictions").rglob("*.json")}
    table = list(csv.DictReader((run / "summary" / "needlebench_summary.csv").open(encoding="utf-8")))
    assert any(r["api-model complete"] == "False" and int(r["api-model failed"]) for r in table)
    dry = subprocess.run([bin_path("needlebench"), "retry", str(run), "--dry-run"], capture_output=True, text=True)
    assert dry.returncode == 0 and "api-model / needlebench_srt_" in dry.stdout and "oracle" not in dry.stdout
    healthy_log = tmp_path / "healthy.jsonl"
    argv = [bin_path("needlebench"), "retry", str(run), "--model", "api-model"]
    done = served(failed_run.port, healthy_log, argv, "--never-every", "0")
    assert "still failed" in done.stdout and ", 0 still failed" in done.stdout
    answered = [json.loads(x)["fault"] for x in healthy_log.read_text().splitlines()]
    assert answered.count("ok") == len(failed)  # only the failed prompts were asked
    samples = _api_samples(run)
    assert {s["unscored"] for s in samples} == {None} and {s["score"] for s in samples} == {100.0}
    after = {p: p.read_bytes() for p in (run / "predictions").rglob("*.json")}
    changed = {p for p in before if after.get(p) != before[p]}
    assert changed and all(p.parent.name == "api-model" for p in changed)
    assert all(p in after for p in before)
    table = list(csv.DictReader((run / "summary" / "needlebench_summary.csv").open(encoding="utf-8")))
    assert all(r["api-model complete"] == "True" and r["oracle complete"] == "True" for r in table)


@pytest.mark.parametrize("case", list(PARITY))
def test_parity_refuses_bad_input(tmp_path: Path, case: str, capsys: pytest.CaptureFixture) -> None:
    """Refused before either side builds a prompt, naming the user's folder (not the scratch link the
    loaders read it through); no parity.json or parity.md written."""
    check_case(PARITY, case, Path("/nonexistent-run"), tmp_path, capsys)
    assert not (tmp_path / "out").exists()


PRICES = {
    "malformed TOML": ("[models.long\ninput = 1\n", ["prices.toml is not TOML", "line 1"]),
    "a negative price": ("[models.long]\ninput = -2.5\noutput = 10\n", ["models.long: input", "got -2.5"]),
    "a missing price": ("[models.long]\ninput = 2.5\n", ["models.long: output", "it is missing"]),
    "not a number": ("[default]\ninput = 1\noutput = nan\n", ["default: output", "got nan"]),
    "a model not a table": ("[models]\nlong = 3\n", ["models.long must be a table"]),
    "a tier not a table": ("[models.long]\ninput = 1\noutput = 1\ntiers = [2]\n", ["models.long tier 1", "table"]),
    "a batch fraction over 1": ("[default]\ninput = 1\noutput = 1\nbatch = 1.5\n", ["default: batch", "1.5"]),
    "an unknown model": ("[models.lnog]\ninput = 1\noutput = 1\n", ["['lnog']", "plan_tiny.py", "'long'"]),
}


@pytest.mark.parametrize("case", list(PRICES))
def test_plan_prices_refuse_bad_input(tmp_path: Path, case: str, capsys: pytest.CaptureFixture) -> None:
    """A prices file refused where it is read (or, for a model the config lacks, once the config's models are
    known), before any dataset cache is built: the dataset cache as it was."""
    text, names = PRICES[case]
    prices = tmp_path / "prices.toml"
    prices.write_text(text, encoding="utf-8")
    cache = Path(os.environ["NEEDLEBENCH_CACHE"])
    before = listing(cache)
    argv = ["plan", str(ROOT / "tests" / "configs" / "plan_tiny.py"), "--prices", str(prices)]
    refused(argv, tmp_path, capsys, *names)
    assert listing(cache) == before
