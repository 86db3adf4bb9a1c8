"""Runs that survive faults: a flaky inference server and a killed run, with real processes and sockets."""

from __future__ import annotations

import csv
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import (
    OPENCOMPASS,
    ROOT,
    VENV_BIN,
    free_port,
    kill_when,
    run_opencompass,
    start_flaky_server,
    stop_server,
    wait_healthy,
)

pytestmark = pytest.mark.e2e


def test_flaky_server_run_completes_and_marks_failed_requests(tmp_path: Path) -> None:
    """500/503, 429 + Retry-After, timeouts, resets, truncated JSON, empty content and slow bodies are retried;
    a prompt that never gets an answer is recorded as request_failed, apart from wrong answers."""
    port, log = free_port(), tmp_path / "requests.jsonl"
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tools" / "flaky_server.py"), "--port", str(port), "--log", str(log)]
        + ["--never-every", "4", "--faults-per-prompt", "2", "--max-seconds", "600", "--echo"],
    )
    try:
        wait_healthy(port, server, 60)
        env = dict(os.environ, NEEDLEBENCH_API_BASE=f"http://127.0.0.1:{port}/v1")
        run = run_opencompass("tests/configs/e2e_flaky.py", tmp_path / "work", env=env)
    finally:
        server.terminate()
        server.wait(timeout=30)
    requests = [json.loads(x) for x in log.read_text().splitlines()]
    by_prompt: dict[str, list[str]] = {}
    for r in requests:
        by_prompt.setdefault(r["prompt"], []).append(r["fault"])
    assert len(by_prompt) == 12
    never = [p for p, faults in by_prompt.items() if not {"ok", "slow_stream"} & set(faults)]
    answered = len(by_prompt) - len(never)
    assert never and answered, by_prompt  # both kinds occurred
    seen = {f for faults in by_prompt.values() for f in faults}
    assert {"http_500", "http_503", "http_429", "timeout", "reset", "truncated_json", "empty_content"} <= seen
    samples = [
        json.loads(x)
        for lang in ("en", "zh")
        for x in (run / "results" / "api-model" / f"needlebench_srt_{lang}_4k.samples.jsonl").read_text().splitlines()
    ]
    assert len(samples) == 12
    failed = [s for s in samples if s["error"] == "request_failed"]
    assert len(failed) == len(never)
    # a failed request is left out as such, unless its prompt was shortened (the 2,000-token ones, past the model's
    # 1,500): that reason comes first
    assert all(s["score"] is None for s in failed)
    assert [s["unscored"] for s in failed] == [
        "shortened" if s.get("shortened_from") is not None else "request_failed" for s in failed
    ]
    # a failed request reached the evaluator as a structured prediction, never as text in the prediction
    saved = [
        row["prediction"]
        for path in (run / "predictions" / "api-model").glob("*.json")
        for row in json.loads(path.read_text(encoding="utf-8")).values()
    ]
    assert len(saved) == 12 and sum(isinstance(p, dict) for p in saved) == len(never)
    assert not any(isinstance(p, str) and p.startswith("\x00") for p in saved + [s["prediction"] for s in samples])
    # every answered request is the server's real answer (FLAKY_OK, then the prompt): no fault leaked into it
    answered_samples = [s for s in samples if s["error"] != "request_failed"]
    assert all(s["prediction"].startswith("FLAKY_OK\n") and s["score"] == 100 for s in answered_samples)
    table = {
        (r["task"], r["lang"], r["length"]): r
        for r in csv.DictReader((run / "summary" / "needlebench_summary.csv").open(encoding="utf-8"))
    }
    shortened = [s for s in samples if s.get("shortened_from") is not None]
    assert {s["length"] for s in shortened} == {2000} and len(shortened) == 6  # every 2000-token prompt, no other
    total = sum(int(table[("S-RT", lang, "all")]["api-model failed"]) for lang in ("EN", "ZH"))
    assert total == len([s for s in failed if s not in shortened])  # a shortened prompt is counted as shortened
    assert table[("S-RT", "OVERALL", "all")]["api-model complete"] == "False"
    assert (
        "request failed"
        in table[("S-RT", "EN", "all")]["api-model note"] + table[("S-RT", "ZH", "all")]["api-model note"]
    )
    _same_cells(run, table, samples)
    _report_agrees(run)


def _same_cells(run: Path, table: dict, samples: list[dict]) -> None:
    """OpenCompass's summary CSV and needlebench_summary.csv give one number per cell, with the same counts.

    A dataset's ``score`` is its language row (the pooled scored samples), ``length_<L>`` its length cell;
    failed requests and shortened prompts are left out of both and counted in both. A cell with nothing
    scored has no number in either file (OpenCompass's summary writes ``-`` or no row, ours an empty cell).
    """
    (oc_csv,) = (run / "summary").glob("summary_*.csv")
    oc = {(r["dataset"], r["metric"]): r["api-model"] for r in csv.DictReader(oc_csv.open(encoding="utf-8"))}

    def value(text: str | None) -> float | None:
        return None if text in (None, "", "-") else float(text)

    numbers = 0
    for lang in ("en", "zh"):
        abbr, mine = f"needlebench_srt_{lang}_4k", [s for s in samples if s["lang"] == lang]
        lang_row = table[("S-RT", lang.upper(), "all")]
        pairs = [(oc[(abbr, "score")], lang_row["api-model"])]
        pairs += [
            (oc.get((abbr, f"length_{n}")), table[("S-RT", lang.upper(), str(n))]["api-model"]) for n in (1000, 2000)
        ]
        for theirs, ours in pairs:
            assert (value(theirs) is None) == (value(ours) is None), (abbr, theirs, ours)
            if value(ours) is not None:
                assert value(theirs) == pytest.approx(value(ours), abs=0.005), (abbr, theirs, ours)
                numbers += 1
        for metric, column in (("num_scored", "scored"), ("num_failed", "failed"), ("num_shortened", "shortened")):
            assert int(float(oc[(abbr, metric)])) == int(lang_row[f"api-model {column}"]), (abbr, metric)
        assert int(float(oc[(abbr, "num_samples")])) == len(mine)
    assert numbers  # at least one cell was scored and compared


def _report_agrees(run: Path) -> None:
    """report.html shows needlebench_summary.csv's numbers cell by cell: every value, count and interval.

    With :func:`_same_cells` this closes the loop: OpenCompass's summary CSV, ``needlebench_summary.csv``
    and the page a reader sees agree on one mixed run (echo answers scoring 100, failed requests, shortened
    prompts). Columns are matched by name (with one model the page drops its name before the counts);
    missing numbers are empty in the CSV and "-" on the page.
    """
    page = (run / "summary" / "report.html").read_text(encoding="utf-8")
    section = re.search(r"<h2>needlebench_summary</h2><table>(.*?)</table>", page, re.S)
    assert section, "report.html has no needlebench_summary table"
    head = [html.unescape(h) for h in re.findall(r"<th>(.*?)</th>", section.group(1))]
    rows = [re.findall(r"<td>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", section.group(1))[1:]]
    csv_rows = list(csv.DictReader((run / "summary" / "needlebench_summary.csv").open(encoding="utf-8")))
    assert len(rows) == len(csv_rows) > 0

    def shown(cell: str) -> str:
        text = re.sub(r"<span class='(badge|flag|ci)'[^>]*>.*?</span>", "", cell.split("<br>")[0])
        return html.unescape(text).strip()

    def number(text: str) -> float | None:
        try:
            return None if text in ("", "-", "nan") else float(text)
        except ValueError:
            return None

    compared = intervals = 0  # numbers and intervals read from the page
    for cells, mine in zip(rows, csv_rows, strict=True):
        assert len(cells) == len(head)
        for name, cell in zip(head, cells, strict=True):
            column = name if name in mine else f"api-model {name}"
            ours, theirs = mine[column], shown(cell)
            if number(ours) is None and ours not in ("", "nan"):  # text: task, language, note, corpus
                assert theirs == ours, (column, ours, theirs)
                continue
            assert (number(theirs) is None) == (number(ours) is None), (column, ours, theirs)
            if number(ours) is not None:
                assert number(theirs) == pytest.approx(number(ours), abs=0.005), (column, ours, theirs)
                compared += 1
            bounds = re.search(r"<span class='ci'[^>]*>\[(.*?), (.*?)\]</span>", cell)
            if bounds:
                for bound, side in zip(bounds.groups(), ("ci_low", "ci_high"), strict=True):
                    assert float(bound) == pytest.approx(float(mine[f"{column} {side}"]), abs=0.051), (column, side)
                intervals += 1
            else:
                assert number(mine.get(f"{column} ci_low", "")) is None, (column, "interval not shown")
    assert compared and intervals  # the page's numbers were read, not skipped


def _opencompass(work: Path, *extra: str, delay: float = 1.0) -> subprocess.Popen:
    """The resume config's run, its oracle waiting ``delay`` seconds an answer (a kill needs time to land)."""
    return subprocess.Popen(
        [*OPENCOMPASS, "tests/configs/e2e_resume.py", "-w", str(work), *extra],
        cwd=ROOT,
        env={**os.environ, "NEEDLEBENCH_TEST_DELAY": str(delay)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the kill reaches every task it started
    )


def _summary(run: Path) -> str:
    return (run / "summary" / "needlebench_summary.csv").read_text(encoding="utf-8")


def test_resume_after_sigkill_in_inference_and_in_evaluation(tmp_path: Path) -> None:
    """`opencompass CONFIG -r` after a SIGKILL mid-inference, then mid-evaluation: nothing lost, nothing twice."""
    # the uninterrupted run goes on beside the killed one, whose oracle mostly waits (its delay)
    clean_work = tmp_path / "clean"
    clean_run = _opencompass(clean_work, delay=0.0)
    work = tmp_path / "killed"
    kill_when(work, _opencompass(work), "*/predictions/slow/tmp_*.jsonl")  # a shard is half done
    (run,) = [p for p in work.iterdir() if p.is_dir()]
    assert not (run / "results").exists() or not list((run / "results").rglob("*.json"))
    proc = _opencompass(work, "-r", run.name, delay=0.0)  # this kill waits for the eval stage
    kill_when(work, proc, "*/results/slow/*.samples.jsonl")  # the first dataset is scored
    done = {p.name for p in (run / "results" / "slow").glob("*.samples.jsonl")}
    assert 0 < len(done) < 6
    assert _opencompass(work, "-r", run.name, delay=0.0).wait(timeout=900) == 0
    assert clean_run.wait(timeout=900) == 0
    (clean,) = [p for p in clean_work.iterdir() if p.is_dir()]
    for abbr, n in (
        ("needlebench_srt_en_4k", 6),
        ("needlebench_srt_zh_4k", 6),
        ("needlebench_mrt_en_4k", 2),
        ("needlebench_mrs_en_4k", 6),
    ):
        rows = [json.loads(x) for x in (run / "results" / "slow" / f"{abbr}.samples.jsonl").read_text().splitlines()]
        assert len(rows) == len({r["id"] for r in rows}) == n  # every sample once
    assert _summary(run) == _summary(clean)
    table = list(csv.DictReader((run / "summary" / "needlebench_summary.csv").open(encoding="utf-8")))
    assert table and all(float(r["slow"]) == 100.0 and r["slow complete"] == "True" for r in table)


# ---- a resume after a setting changed: the stored plan is the authority ---------------------------------------


def _replan_run(work: Path, calls: Path, *extra: str, **env: str) -> subprocess.CompletedProcess:
    """tests/configs/e2e_replan.py through ``needlebench run`` (``--replan`` among ``extra`` where asked), its
    settings from ``env``; the counted oracle on the path."""
    path = os.pathsep.join(filter(None, [str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [str(VENV_BIN / "needlebench"), "run", "tests/configs/e2e_replan.py", "-w", str(work), *extra],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": path, "NEEDLEBENCH_TEST_CALLS": str(calls), **env},
        capture_output=True,
        text=True,
        timeout=900,
    )


def _tiny_tokenizer(folder: Path) -> Path:
    """A local tokenizer folder (words split on whitespace): another tokenizer for the same model."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(str(folder))
    return folder


def test_a_resume_under_another_plan_stops_before_any_call_and_replans_keeping_valid_answers(tmp_path: Path) -> None:
    """Resumed with another shard count, output budget or tokenizer, a run stops before any model call naming the
    change; with `needlebench run --replan` it finishes, asking only the prompts whose answers are no longer valid
    (none for the shards and the tokenizer, every one for the budget), and its summary is the clean run's."""
    work, calls = tmp_path / "work", tmp_path / "calls.txt"
    # a budget the tiny tokenizer's word counts stay under (at 16 some answers would read as cut off)
    first = _replan_run(work, calls, NEEDLEBENCH_TEST_OUT="24")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    (run,) = [p for p in work.iterdir() if p.is_dir()]
    asked = calls.read_text().splitlines()
    assert len(asked) == len(set(asked)) == 8  # S-RT and M-RS, 2 lengths x 2 depths each
    clean = _summary(run)
    tokenizer = str(_tiny_tokenizer(tmp_path / "tok"))
    # two changes that keep every answer at once (each named), then one that keeps none
    kept = {"NEEDLEBENCH_TEST_OUT": "24", "NEEDLEBENCH_TEST_SHARDS": "3", "NEEDLEBENCH_TEST_TOKENIZER": tokenizer}
    changes = (
        (kept, ["partitioner num_shards: 2 -> 3", "output_tokenizer None -> "], 0),
        ({**kept, "NEEDLEBENCH_TEST_OUT": "32"}, ["out_len 24 -> 32"], 8),
    )
    for env, named, reasked in changes:
        before = len(calls.read_text().splitlines())
        stopped = _replan_run(work, calls, "-r", run.name, **env)
        said = stopped.stdout + stopped.stderr
        assert stopped.returncode != 0 and "--replan" in said, said[-3000:]
        assert all(name in said for name in named), (named, said[-3000:])
        assert len(calls.read_text().splitlines()) == before  # no model was asked anything
        done = _replan_run(work, calls, "-r", run.name, "--replan", **env)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        again = calls.read_text().splitlines()[before:]
        assert len(again) == len(set(again)) == reasked, named
        assert _summary(run) == clean, named
        for abbr in ("needlebench_srt_en_4k", "needlebench_mrs_en_4k"):
            rows = [
                json.loads(x) for x in (run / "results" / "counted" / f"{abbr}.samples.jsonl").read_text().splitlines()
            ]
            assert len(rows) == len({r["id"] for r in rows}) == 4  # every sample once
        plan = json.loads((run / "needlebench_plan.json").read_text())
        assert plan["settings"]["num_shards"] == 3
        *_, last, evaluated = plan["history"]  # the re-plan, then the eval stage of the same process
        assert {k: evaluated[k] for k in ("stage", "request", "pid")} == {
            "stage": "eval",
            "request": {},
            "pid": last["pid"],
        }
        assert {k: last[k] for k in ("stage", "request")} == {
            "stage": "replan",
            "request": {"replan": True, "retry": None, "batch": None},
        }
        assert last["host"] and last["pid"] > 0 and last["at"] > plan["history"][0]["at"]  # who ran it, and when
        assert not (run / "needlebench_request.json").exists()  # taken: the next resume is a plain one


# ---- failed requests asked again in the run (on a resume, with `needlebench retry`: tests/test_command_errors.py,
# whose one failed run it fills) ----------------------------------------------------------------------------------


def _flaky_server(port: int, log: Path, *options: str) -> subprocess.Popen:
    return start_flaky_server(port, log, "--faults-per-prompt", "0", "--max-seconds", "600", "--echo", *options)


def _answered(log: Path) -> dict[str, int]:
    """Per prompt, how many requests the server answered."""
    out: dict[str, int] = {}
    for line in log.read_text().splitlines():
        r = json.loads(line)
        out[r["prompt"]] = out.get(r["prompt"], 0) + (r["fault"] == "ok")
    return out


def _samples(run: Path, model: str) -> list[dict]:
    return [
        json.loads(x)
        for lang in ("en", "zh")
        for x in (run / "results" / model / f"needlebench_srt_{lang}_4k.samples.jsonl").read_text().splitlines()
    ]


def test_failed_requests_are_asked_again_in_the_run_and_each_prompt_answered_once(tmp_path: Path) -> None:
    """A server that fails some prompts for their first requests: the run's second pass asks them again, none is
    left failed, every prompt is answered exactly once, and every sample scores as against a healthy server;
    the oracle model beside it is untouched."""
    port, log = free_port(), tmp_path / "requests.jsonl"
    server = _flaky_server(port, log, "--never-every", "3", "--fail-first", "4")
    try:
        env = dict(os.environ, NEEDLEBENCH_API_BASE=f"http://127.0.0.1:{port}/v1")
        run = run_opencompass("tests/configs/e2e_retry.py", tmp_path / "work", env=env)
    finally:
        stop_server(server)
    answered = _answered(log)
    assert len(answered) == 12 and set(answered.values()) == {1}, answered
    records = [
        json.loads(x)
        for x in (run / "predictions" / "api-model" / "needlebench_retries.jsonl").read_text().splitlines()
    ]
    # asked again: each prompt the server failed (its --never-every class, by the server's own log), once
    faulted = {r["prompt"] for r in map(json.loads, log.read_text().splitlines()) if r["fault"] != "ok"}
    assert sum(r["asked_again"] for r in records) == len(faulted) == 5, records  # 5 of the 12 prompts
    assert sum(r["still_failed"] for r in records) == 0, records
    samples = _samples(run, "api-model")
    assert (
        len(samples) == 12 and {s["unscored"] for s in samples} == {None} and {s["score"] for s in samples} == {100.0}
    )
    bundle = json.loads((run / "summary" / "results.json").read_text())
    assert bundle["retries"]["api-model"]["asked_again"] == len(faulted)
    assert bundle["retries"]["api-model"]["still_failed"] == 0
    assert bundle["retries"]["oracle"] == {"asked_again": 0, "passes": 0, "still_failed": 0}
    # how each model's requests went out: its batch size, the most in flight, the order (results.json `requests`)
    for model in ("api-model", "oracle"):
        sent = bundle["requests"][model]
        assert sent["batch_size"] == [4] and sent["in_flight"] == [4] and sent["flow"] is None, (model, sent)
        assert sent["order"] == ["needlebench stream: datasets sharing a haystack interleaved, rows in dataset order"]
    assert {s["score"] for s in _samples(run, "oracle")} == {100.0}


@pytest.fixture(scope="module")
def reasoning_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    """One run of tests/configs/e2e_reasoning_api.py against the scripted reasoning server: the run folder and,
    per prompt (its last message), what the server sent."""
    tmp = tmp_path_factory.mktemp("reasoning")
    port, log = free_port(), tmp / "requests.jsonl"
    server = _flaky_server(port, log, "--never-every", "0", "--reasoning", "--log-messages")
    try:
        env = dict(os.environ, NEEDLEBENCH_API_BASE=f"http://127.0.0.1:{port}/v1")
        run = run_opencompass("tests/configs/e2e_reasoning_api.py", tmp / "work", env=env)
    finally:
        stop_server(server)
    return run, {r["messages"][-1]["content"]: r for r in map(json.loads, log.read_text().splitlines())}


def _reasoned_samples(run: Path, model: str, abbr: str) -> list[tuple[dict, dict]]:
    """(prediction row, graded record) pairs of one dataset, in row order."""
    from needlebench.runfolder.predictions import dataset_prediction_files

    rows = []
    for path in dataset_prediction_files(str(run / "predictions" / model / f"{abbr}.json")):  # whole, or its parts
        part = json.loads(Path(path).read_text(encoding="utf-8"))
        rows += [r for _, r in sorted(part.items(), key=lambda kv: int(kv[0]))]
    records = [json.loads(x) for x in (run / "results" / model / f"{abbr}.samples.jsonl").open()]
    assert len(rows) == len(records) == 6
    return list(zip(rows, records, strict=True))


def test_reasoning_returned_apart_is_kept_counted_by_the_server_and_scored_as_opencompass_scores(
    reasoning_run: tuple[Path, dict[str, dict]],
) -> None:
    """A server that returns ``reasoning_content`` apart (the scripted server's ``--reasoning``): each record's
    ``output_tokens`` is the server's ``usage.completion_tokens``, ``truncated`` its ``finish_reason == "length"``,
    its reasoning is kept and shown in the report's drill-down, an empty answer cut off while reasoning is
    counted in its cell, and under ``reasoning_apart="joined"`` every answer scores what OpenCompass's evaluator
    gives the text its ``OpenAISDK`` returns (reasoning, ``</think>``, answer) after its reasoning model's
    postprocessor; by default the answer alone is postprocessed and scored."""
    from opencompass.datasets.needlebench_v2.origin import NeedleBenchOriginEvaluator
    from opencompass.utils.text_postprocessors import extract_non_reasoning_content

    from needlebench.opencompass.scripted import last_human_message

    run, by_prompt = reasoning_run
    assert len(by_prompt) == 12 and all("reasoning" in r for r in by_prompt.values())
    ran_out = 0
    for lang in ("en", "zh"):
        for suffix in ("", "_joined"):
            for row, record in _reasoned_samples(run, "api-model", f"needlebench_srt_{lang}_4k{suffix}"):
                sent = by_prompt[last_human_message(row["origin_prompt"])]
                assert record["output_tokens"] == sent["completion_tokens"], record
                assert record["output_tokenizer"] == "server:usage.completion_tokens"
                assert record["truncated"] == (sent["finish"] == "length")
                assert record["reasoning"] == sent["reasoning"]
                assert record["ran_out_reasoning"] == (sent["finish"] == "length" and sent["content"] == "")
                ran_out += record["ran_out_reasoning"]
                if suffix:  # what OpenCompass's OpenAISDK returns for this response, through its postprocessor
                    theirs = sent["reasoning"] + ("</think>" + sent["content"] if sent["content"] else "")
                    text = extract_non_reasoning_content(theirs)
                else:  # the answer alone, through the same postprocessor
                    text = extract_non_reasoning_content(sent["content"])
                assert record["prediction"] == text
                assert record["score"] is not None and record["unscored"] is None  # reference: scored as written
                gold = json.loads(row["gold"])  # OpenCompass's S-RT reference is "needle*keyword"
                reference = f"{gold['needle']}*{gold['keywords'][0]}"
                expected = NeedleBenchOriginEvaluator().score([text], [reference])["score"]
                assert record["score"] == pytest.approx(expected), record
                decoy = sent["content"] == "I could not find it in the document."
                assert record["score"] == (0.0 if record["ran_out_reasoning"] or decoy else 100.0)
    assert 0 < ran_out < 24
    table = list(csv.DictReader((run / "summary" / "needlebench_summary.csv").open(encoding="utf-8")))
    notes = " ".join(r.get("api-model note", "") for r in table)
    assert "no answer: budget ran out while reasoning" in notes, table[:2]
    page = (run / "summary" / "report.html").read_text(encoding="utf-8")
    payload = re.search(r"<script[^>]*id='nb-samples'[^>]*>([^<]+)</script>", page)
    assert payload is not None
    import base64
    import gzip

    listed = json.loads(gzip.decompress(base64.b64decode(payload.group(1).strip())))
    shown = [s for s in listed if s.get("reasoning")]
    assert len(shown) == 48 and any("budget ran out while reasoning" in s["error"] for s in shown)


def test_reasoning_returned_apart_is_not_the_answer_unless_asked(reasoning_run: tuple[Path, dict[str, dict]]) -> None:
    """With the plain API model (no think strip), a decoy (the gold only in the reasoning the server returned
    apart, the answer "I could not find it") scores 0 by default and 100 under ``reasoning_apart="joined"``,
    OpenCompass's scoring of the text its ``OpenAISDK`` joins; an answer with the gold scores 100 either way."""
    from opencompass.datasets.needlebench_v2.origin import NeedleBenchOriginEvaluator

    from needlebench.opencompass.scripted import last_human_message

    run, by_prompt = reasoning_run
    decoys = 0
    for lang in ("en", "zh"):
        default = _reasoned_samples(run, "api-plain", f"needlebench_srt_{lang}_4k")
        joined = _reasoned_samples(run, "api-plain", f"needlebench_srt_{lang}_4k_joined")
        for (row, ours), (_, theirs) in zip(default, joined, strict=True):
            sent = by_prompt[last_human_message(row["origin_prompt"])]
            gold = json.loads(row["gold"])
            reference = f"{gold['needle']}*{gold['keywords'][0]}"
            text = sent["reasoning"] + ("</think>" + sent["content"] if sent["content"] else "")
            assert theirs["score"] == NeedleBenchOriginEvaluator().score([text], [reference])["score"]
            assert ours["prediction"] == sent["content"]
            if sent["content"] == "I could not find it in the document.":
                decoys += 1
                assert (ours["score"], theirs["score"]) == (0.0, 100.0), (ours, theirs)
            elif sent["content"]:
                assert (ours["score"], theirs["score"]) == (100.0, 100.0), (ours, theirs)
            else:  # ran out while reasoning: no answer; the joined text is the reasoning, which lacks the gold
                assert ours["ran_out_reasoning"] and ours["score"] == 0.0
    assert decoys > 0
