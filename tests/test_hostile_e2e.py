"""Hostile model output end to end: nothing a model writes drops a sample, moves a score or runs in a page.

``tools/flaky_server.py --hostile`` answers the 16 prompts of ``tests/configs/e2e_hostile.py`` (S-RT and M-RT,
English and Chinese) through our API model in a real ``opencompass`` run: each of its hostile texts (every
Unicode line break, NUL, lone surrogates as JSON escapes, invalid UTF-8 bytes on the wire, 1 MB, markup and
``</script>`` / ``<!--`` / ``<img onerror>`` break-outs, template syntax, ANSI escapes) once after the sample's
gold (it scores 100) and once alone (0). Then every table must count all 16 samples, every score must be the
grader's on the text the server sent, and ``report.html`` and ``leaderboard.html`` opened in Debian's Chromium
must show every answer as text, under their Content-Security-Policy, with no script of the model's run.
"""

from __future__ import annotations

import base64
import csv
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    ROOT,
    bin_path,
    free_port,
    launch_chromium,
    run_export,
    run_opencompass,
    start_flaky_server,
    stop_server,
)

from needlebench.grading.evaluation import PREDICTION_CHARS
from needlebench.jsonl import read_jsonl
from needlebench.opencompass.evaluator import SUMMARY_HEADLINE
from needlebench.report.drilldown import ANSWER_CHARS
from needlebench.scoring import ScoreOptions
from needlebench.tasks import get_task

pytestmark = pytest.mark.e2e

CONFIG = "tests/configs/e2e_hostile.py"
MODEL = "hostile"
sys.path.insert(0, str(ROOT / "tools"))
from flaky_server import HOSTILE  # noqa: E402  (a tool script, not a package)

# Installed before any page script: a hostile text that ran would set window.__pwned or open a dialog; every
# CSP violation (a refused script, style or image) is noted too.
TRAP = """
window.__nbHits = [];
Object.defineProperty(window, '__pwned', {
  configurable: false,
  get() { return undefined; },
  set(v) { window.__nbHits.push('__pwned=' + v); },
});
document.addEventListener('securitypolicyviolation', e => window.__nbHits.push(
  'csp:' + e.violatedDirective + ':' + (e.sample || e.blockedURI)));
"""


@dataclass(frozen=True)
class Sent:
    """What the server answered one prompt with."""

    kind: str  # the HOSTILE text
    with_gold: bool  # after the sample's gold
    text: str  # the answer as a client that reads invalid UTF-8 as U+FFFD decodes it


@dataclass(frozen=True)
class HostileRun:
    run: Path  # the timestamped run folder
    rows: dict[str, dict]  # sample id -> exported row (prompt, gold)
    sent: dict[str, Sent]  # sample id -> the answer sent
    records: dict[str, dict]  # sample id -> its graded record (samples.jsonl)
    leaderboard: Path  # leaderboard.html


def _decoded(content: bytes) -> str:
    """The JSON string body ``content`` as text: invalid UTF-8 as U+FFFD, escapes (lone surrogates too) as written."""
    return json.loads('"' + content.decode("utf-8", "replace") + '"')


def _shown(text: str) -> str:
    """``text`` as a UTF-8 file and a page can hold it: a lone surrogate becomes U+FFFD, nothing else changes."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> HostileRun:
    tmp = tmp_path_factory.mktemp("hostile")
    port, log, script = free_port(), tmp / "requests.jsonl", tmp / "script.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NEEDLEBENCH_API_BASE", f"http://127.0.0.1:{port}/v1")
        rows = {r["id"]: r for r in run_export(CONFIG, tmp / "export.jsonl")}
    kinds = list(HOSTILE)
    assert len(rows) == 2 * len(kinds) == 16
    plan: dict[str, dict[str, Any]] = {}
    by_digest: dict[str, str] = {}
    for i, sid in enumerate(sorted(rows)):  # each hostile text once after the gold, once alone
        row = rows[sid]
        gold = row["gold"] if isinstance(row["gold"], dict) else json.loads(row["gold"])
        digest = hashlib.sha256(row["prompt"].encode("utf-8")).hexdigest()
        answer = get_task(row["task"]).oracle(gold) if i % 2 == 0 else ""
        plan[digest] = {"gold": answer, "kind": kinds[i // 2]}
        by_digest[digest] = sid
    script.write_text(json.dumps(plan), encoding="utf-8")
    server = start_flaky_server(port, log, "--hostile", str(script), "--never-every", "0", "--faults-per-prompt", "0")
    try:
        env = dict(os.environ, NEEDLEBENCH_API_BASE=f"http://127.0.0.1:{port}/v1")
        run = run_opencompass(CONFIG, tmp / "work", env=env)
    finally:
        stop_server(server)
    sent: dict[str, Sent] = {}
    for entry in read_jsonl(log):
        assert entry["scripted"], f"a prompt the script does not hold reached the server: {entry['sha256']}"
        step = plan[entry["sha256"]]
        text = _decoded(base64.b64decode(entry["content_b64"]))
        sent[by_digest[entry["sha256"]]] = Sent(step["kind"], bool(step["gold"]), text)
    assert set(sent) == set(rows), "every prompt was asked"
    records = {
        r["id"]: r for path in sorted((run / "results" / MODEL).glob("*.samples.jsonl")) for r in read_jsonl(path)
    }
    board = tmp / "board"
    made = subprocess.run(
        [bin_path("needlebench"), "leaderboard", str(run), "-o", str(board)], capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr[-2000:]
    return HostileRun(run, rows, sent, records, board / "leaderboard.html")


def test_every_table_counts_every_planned_sample(hostile: HostileRun) -> None:
    run = hostile.run
    assert set(hostile.records) == set(hostile.rows), "a sample was dropped from samples.jsonl"
    assert all(r["unscored"] is None and r["score"] is not None for r in hostile.records.values())
    # needlebench_summary.csv: every cell planned == scored, complete
    table = list(csv.DictReader((run / "summary" / "needlebench_summary.csv").open(encoding="utf-8")))
    cells = [r for r in table if r["length"] not in ("all", "")]
    assert cells and all(r[f"{MODEL} planned"] == r[f"{MODEL} scored"] != "0" for r in cells), cells
    assert all(r[f"{MODEL} complete"] == "True" for r in table if f"{MODEL} complete" in r and r[f"{MODEL} planned"])
    planned = {(r["task"], r["lang"]): int(r[f"{MODEL} planned"]) for r in table if r["length"] == "all"}
    srt, mrt = {"EN": 6, "ZH": 6, "OVERALL": 12}, {"EN": 2, "ZH": 2, "OVERALL": 4}
    assert planned == {**{("S-RT", k): n for k, n in srt.items()}, **{("M-RT", k): n for k, n in mrt.items()}}
    # OpenCompass's own summary (its headline rows, under their words) and per-dataset results
    (oc_csv,) = (run / "summary").glob("summary_*.csv")
    oc = {(r["dataset"], r["metric"]): r[MODEL] for r in csv.DictReader(oc_csv.open(encoding="utf-8"))}
    for abbr, n in (("srt_en", 6), ("srt_zh", 6), ("mrt_en", 2), ("mrt_zh", 2)):
        dataset = f"needlebench_{abbr}_4k"
        oc_planned, oc_scored = (oc[(dataset, dict(SUMMARY_HEADLINE)[k])] for k in ("num_samples", "num_scored"))
        assert int(float(oc_planned)) == n and int(float(oc_scored)) == n
        result = json.loads((run / "results" / MODEL / f"{dataset}.json").read_text(encoding="utf-8"))
        assert int(result["num_samples"]) == n and int(result["num_scored"]) == n, result
    # the result bundle, and needlebench verify agreeing with it
    bundle = json.loads((run / "summary" / "results.json").read_text(encoding="utf-8"))
    assert bundle["samples"]["count"] == 16
    verify = subprocess.run(
        [bin_path("needlebench"), "verify", str(run / "summary" / "results.json"), str(run)],
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 0, verify.stdout[-2000:] + verify.stderr[-2000:]
    # the heatmaps' drill-down payload
    page = (run / "summary" / "report.html").read_text(encoding="utf-8")
    (payload,) = re.findall(r"<script type='application/octet-stream' id='nb-samples'>([^<]*)</script>", page)
    shown = json.loads(gzip.decompress(base64.b64decode(payload)))
    assert sorted(s["id"] for s in shown) == sorted(hostile.rows)


def test_each_score_is_the_graders_on_the_text_sent(hostile: HostileRun) -> None:
    scores = {True: 0, False: 0}
    for sid, sent in hostile.sent.items():
        row, record = hostile.rows[sid], hostile.records[sid]
        gold = row["gold"] if isinstance(row["gold"], dict) else json.loads(row["gold"])
        expected = get_task(row["task"]).grade(sent.text, gold, ScoreOptions())
        assert record["score"] == expected.score, (sid, sent.kind, record["score"], expected)
        assert expected.score == (100.0 if sent.with_gold else 0.0), (sid, sent.kind, expected)
        assert record["prediction"] == _shown(sent.text)[:PREDICTION_CHARS], (sid, sent.kind)  # every character kept
        scores[sent.with_gold] += 1
    assert scores == {True: 8, False: 8}


def _open(browser: Any, path: Path, errors: list[str]) -> Any:
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.add_init_script(TRAP)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
    page.goto(path.resolve().as_uri())
    page.wait_for_load_state("load")
    return page


def test_pages_show_hostile_answers_as_text_and_run_none_of_them(hostile: HostileRun) -> None:
    from playwright.sync_api import sync_playwright

    report = hostile.run / "summary" / "report.html"
    errors: list[str] = []
    answers: dict[str, str] = {}
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = _open(browser, report, errors)
        images = page.evaluate("() => document.images.length")
        cells = page.locator("td.hmc[data-cell]")
        assert cells.count() >= 8
        for i in range(cells.count()):  # every heatmap cell of every task and language
            cells.nth(i).click()
            page.wait_for_selector("#nb-drill tr[data-id]")
            for sid, text in page.locator("#nb-drill tr[data-id]").evaluate_all(
                "rs => rs.map(r => [r.dataset.id, r.querySelectorAll('td')[5].firstChild?.textContent ?? ''])"
            ):
                answers[sid] = text
        injected = page.evaluate(
            """() => [document.images.length, document.getElementById('nb-injected') === null,
                      document.querySelectorAll('#nb-drill img, #nb-drill svg, #nb-drill script, #nb-drill style,'
                        + ' #nb-drill b, #nb-drill i').length,
                      getComputedStyle(document.body).display, window.__pwned, window.__nbHits]"""
        )
        board = _open(browser, hostile.leaderboard, errors)
        head = board.locator("table.board th").first
        head.click()
        sorted_ = head.get_attribute("aria-sort")
        board_hits = board.evaluate("() => [window.__pwned, window.__nbHits]")
        browser.close()
    assert not errors, errors
    assert injected == [images, True, 0, "block", None, []], injected
    assert board_hits == [None, []] and sorted_ == "descending"  # the board's own script runs under its CSP
    assert set(answers) == set(hostile.rows), "every sample is listed under some heatmap cell"
    for sid, sent in hostile.sent.items():
        text = _shown(sent.text)
        want = text if len(text) <= ANSWER_CHARS else text[:ANSWER_CHARS]
        assert answers[sid].startswith(want), (sid, sent.kind, answers[sid][:300], want[:300])


def test_a_script_injected_into_a_page_is_refused(hostile: HostileRun, tmp_path: Path) -> None:
    """The CSP allows the page's own scripts by hash and nothing else: an added script never runs."""
    from playwright.sync_api import sync_playwright

    for source in (hostile.run / "summary" / "report.html", hostile.leaderboard):
        page_text = source.read_text(encoding="utf-8")
        assert page_text.count('http-equiv="Content-Security-Policy"') == 1
        evil = tmp_path / f"evil_{source.name}"
        evil.write_text(
            page_text.replace(
                "</body>", "<script>window.__pwned = 'injected'</script><img src='http://127.0.0.1:9/x.png'></body>"
            ),
            encoding="utf-8",
        )
        errors: list[str] = []
        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = _open(browser, evil, errors)
            hits = page.evaluate("() => [window.__pwned, window.__nbHits]")
            browser.close()
        assert hits[0] is None and "__pwned=injected" not in hits[1], hits
        assert any(h.startswith("csp:script-src") for h in hits[1]), hits  # refused by the policy, and said so
        assert any(h.startswith("csp:img-src") for h in hits[1]), hits
    # the trap itself catches a script that runs (a page without the policy)
    bare = tmp_path / "bare.html"
    bare.write_text("<!DOCTYPE html><html><body><script>window.__pwned = 1</script></body></html>", encoding="utf-8")
    with sync_playwright() as p:
        browser = launch_chromium(p)
        caught = _open(browser, bare, []).evaluate("() => window.__nbHits")
        browser.close()
    assert caught == ["__pwned=1"]


def test_the_policy_allows_exactly_the_pages_own_scripts_styles_and_style_attributes() -> None:
    """Hashes of the exact texts written; style attributes only from tags, never from escaped text or data."""
    import html

    from needlebench.report.csp import content_security_policy, page_head, source_hash, style_attributes

    body = (
        "<td class='hmc' title='x' style='background-color:#a50026'>1</td><td style=\"color:red\">2</td>"
        + html.escape("<b style='display:none'>model text</b>")
        + "<script type='application/json' id='nb-cells'>{\"t\":\"\\u003cb style='x:y'>\"}</script>"
    )
    assert style_attributes(body) == {"background-color:#a50026", "color:red"}
    policy = content_security_policy(["let a = 1;"], ["body{margin:0}"], style_attributes(body))
    assert f"script-src {source_hash('let a = 1;')};" in policy and "'unsafe-inline'" not in policy
    assert f"style-src {source_hash('body{margin:0}')} 'unsafe-hashes' " in policy
    assert source_hash("color:red") in policy and source_hash("x:y") not in policy
    assert policy.startswith("default-src 'none';") and "img-src data:;" in policy
    assert "script-src 'none'" in content_security_policy()  # a page without scripts runs none
    head = page_head("a <title>", body, ["body{margin:0}"], ["let a = 1;"])
    assert head.index("Content-Security-Policy") < head.index("<style>") and "a &lt;title&gt;" in head
