"""The rates ``needlebench plan --rates`` predicts by (``needlebench/planning/rates.py``): the fit recovers known
rates exactly, never fits a negative one, and the prediction is the hand computation. The whole command runs on a
real run in tests/test_cost_ledger.py; its accuracy on a real engine is ``bench/plan_rates.py``'s."""

from __future__ import annotations

import pytest

from needlebench.planning.costs import Price, Tier
from needlebench.planning.rates import Observation, Planned, batch_seconds, fit_rates, predict
from needlebench.runfolder.progress_log import Step, in_flight_span

TRUE = {"batch": 0.05, "computed": 0.2, "attention": 0.01, "decode": 0.02}


def _seconds(sizes: list[tuple[float, float, float]], longest: float | None = None) -> float:
    """A batch's seconds by TRUE's rates, from its requests' (prompt, computed, output) tokens; its decode steps
    are its longest answer's (``longest`` where given)."""
    return (
        TRUE["batch"]
        + TRUE["computed"] * sum(c for _, c, _ in sizes) / 1e3
        + TRUE["attention"] * sum(c / 1e3 * p / 1e3 for p, c, _ in sizes)
        + TRUE["decode"] * (max(o for _, _, o in sizes) if longest is None else longest)
    )


def _batches() -> list[list[Observation]]:
    """Six batches of two requests each; every request's wall time its batch's (a server: all in flight at once)."""
    out = []
    for i, prompt in enumerate((1000, 2000, 4000, 8000, 3000, 6000)):
        sizes = [(prompt, prompt * (0.5 if i % 2 else 1.0), 4 + 3 * i), (prompt / 2, prompt / 2, 2 + i * i)]
        seconds = _seconds(sizes)
        out.append([Observation("srt" if i < 3 else "mrs", int(p), c, int(o), seconds) for p, c, o in sizes])
    return out


def test_the_fit_recovers_the_rates_that_made_the_batches() -> None:
    batches = _batches()
    rates = fit_rates(
        "m", "run", "openai-api 0.32.0", batches, reusable_tokens=6000.0, cached_tokens=3000.0, span_s=10.0
    )
    assert rates.coefficients == pytest.approx(TRUE, rel=1e-6)
    assert rates.fit_error == pytest.approx((0.0, 0.0), abs=1e-9)
    assert (rates.requests, rates.batches, rates.prompt_range) == (12, 6, (500, 8000))
    outputs = {"srt": [4, 2, 7, 3, 10, 6], "mrs": [13, 11, 16, 18, 19, 27]}  # 4 + 3i and 2 + i^2 per batch
    assert rates.output_tokens == pytest.approx({t: sum(v) / 6 for t, v in outputs.items()} | {"*": 136 / 12})
    # each batch's longest answer (4, 7, 10 for S-RT; 13, 18, 27 for M-RS): what its decode steps are counted on
    assert rates.longest_tokens == pytest.approx({"srt": 7.0, "mrs": 58 / 3, "*": 79 / 6})
    assert rates.cache_capture == 0.5  # half of the plan's reusable prefix was served from the cache
    assert rates.batch_s == pytest.approx(sum(batch_seconds(b) for b in batches))
    assert rates.request_s == pytest.approx(2 * rates.batch_s)  # each request waited for its whole batch
    assert rates.parallel == pytest.approx(rates.batch_s / 10.0)


def test_a_batch_takes_its_slowest_request_or_its_shared_clock() -> None:
    own = [Observation("srt", 100, 100, 1, 2.0), Observation("srt", 100, 100, 1, 3.0)]
    shared = [Observation("srt", 100, 100, 1, 2.0, True), Observation("srt", 100, 100, 1, 3.0, True)]
    assert batch_seconds(own) == 3.0 and batch_seconds(shared) == 5.0


def test_a_rate_is_never_fitted_negative() -> None:
    # batches that get faster with longer answers: least squares would give decode a negative rate
    sizes = ((1000, 10), (2000, 1), (3000, 30))
    batches = [[Observation("srt", p, p, o, 0.1 + p / 1e4 - 0.001 * o)] for p, o in sizes]
    rates = fit_rates("m", "run", "", batches, 0.0, None, None)
    assert all(c >= 0 for c in rates.coefficients.values())
    assert rates.coefficients["decode"] == 0.0
    assert rates.cache_capture is None and rates.parallel is None and not rates.cache_reported


def test_the_prediction_is_the_hand_computation() -> None:
    rates = fit_rates("m", "run", "e", _batches(), 6000.0, 3000.0, 10.0)
    srt, mrs = rates.output_tokens["srt"], rates.output_tokens["mrs"]
    batches = [[Planned("srt", 16000, 0.4, 32), Planned("mrs", 12000, 0.0, 8)], [Planned("atc", 500, 0.0, 64)]]
    price = Price((Tier(0, 2.0, 0.5, 8.0),), device_hour=3.0)
    p = predict(rates, batches, devices=2, price=price)
    cached = 0.5 * 0.4 * 16000  # measured capture x the plan's prefix share x prompt tokens
    # answers: srt's measured mean; mrs's within its budget 8; atc unseen: every task's mean. Decode steps: the
    # batch's longest as measured per task (S-RT 7, M-RS 19.3 within its budget 8; ATC: every batch's 13.2)
    first = [(16000.0, 16000 - cached, srt), (12000.0, 12000.0, 8.0)]
    second = [(500.0, 500.0, rates.output_tokens["*"])]
    seconds = _seconds(first, longest=8.0) + _seconds(second, longest=79 / 6)
    assert mrs > 8 and p.batch_s == pytest.approx(seconds)
    assert p.run_s == pytest.approx(seconds / rates.parallel)
    assert p.device_h == pytest.approx(seconds * 2 / 3600)
    tokens = sum(c * 2.0 + (pr - c) * 0.5 + o * 8.0 for pr, c, o in first + second) / 1e6  # computed, cached, out
    assert p.money == pytest.approx(tokens + seconds * 2 / 3600 * 3.0)
    assert (p.requests, p.batches, p.prompt_tokens) == (3, 2, 28500)
    assert p.computed_tokens == pytest.approx(28500 - cached)
    assert p.beyond == 2  # 16k and 12k: past the longest prompt measured (8k)
    assert predict(rates, batches, devices=0).device_h is None  # no GPU held: no device-hours, unpriced
    assert predict(rates, batches, devices=0).money is None


def test_the_span_counts_overlapping_files_once_and_leaves_gaps_and_resumes_out() -> None:
    lines = [("a", 0.0, 0), ("a", 10.0, 4), ("b", 5.0, 0), ("b", 12.0, 4), ("c", 20.0, 0), ("c", 21.0, 4)]
    lines += [("d", 30.0, 0), ("e", 40.0, 0), ("e", 42.0, 4), ("e", 3600.0, 0), ("e", 3603.0, 4)]
    steps = [Step(abbr, t, 0, new) for abbr, t, new in lines]
    # a+b: 0..12; c: 20..21; d: a start alone; e: 40..42, then resumed an hour later: 3600..3603
    assert in_flight_span(steps) == 12.0 + 1.0 + 2.0 + 3.0


def test_each_task_sizes_a_whole_suite_as_its_rows_are() -> None:
    """The report's forecast sizes a suite by each task's ``suite_requests``: the prompts the suite's rows hold
    per length (the 4k suite, English: S-RT 110, M-RT 25, M-RS 440 a length)."""
    import json
    from collections import Counter

    from needlebench.cache.rows import load_rows
    from needlebench.opencompass.configs import needlebench_datasets
    from needlebench.tasks import config_params, get_task

    for d in needlebench_datasets(suite="4k", langs=["en"]):
        rows = load_rows(d["task"], **config_params(d))
        counts = Counter(json.loads(meta)["length"] for meta in rows["meta"])
        assert get_task(d["task"]).aggregation().suite_requests("4k", "en", "v2") == dict(counts), d["abbr"]
