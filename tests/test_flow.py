"""Tokens in flight (``needlebench.flow``): admission in order within the caps, AIMD on throttling answers.

Real threads against the real limiter; the server side is in ``tests/test_vllm_server.py`` (a throttling proxy
in front of the vLLM CPU server).
"""

from __future__ import annotations

import threading
import time

import pytest

from needlebench.flow import FlowControl, FlowLimits
from needlebench.runfolder.request_log import flow_totals


def _run(flow: FlowControl, costs: list[int], hold: float = 0.01) -> tuple[list[int], list[tuple[int, int]]]:
    """Hand ``costs`` over in order from one thread, each request held ``hold`` s on its own thread; returns the
    admission order and (tokens, requests) in flight after each admission."""
    order: list[int] = []
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()
    active = {"tokens": 0, "requests": 0}
    threads = []

    def work(i: int, slot: object) -> None:
        time.sleep(hold)
        with lock:
            active["tokens"] -= costs[i]
            active["requests"] -= 1
        flow.release(slot, ok=True)

    for i, cost in enumerate(costs):
        slot = flow.take_ticket(cost)
        flow.admit(slot)
        with lock:
            order.append(i)
            active["tokens"] += cost
            active["requests"] += 1
            seen.append((active["tokens"], active["requests"]))
        t = threading.Thread(target=work, args=(i, slot))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    return order, seen


def test_admission_keeps_order_and_never_exceeds_the_caps() -> None:
    flow = FlowControl(FlowLimits(max_tokens_in_flight=1000, max_requests_in_flight=3))
    costs = [300, 500, 200, 900, 100, 100, 400, 2500, 50]
    order, seen = _run(flow, costs)
    assert order == list(range(len(costs)))
    # every moment within both caps, except the one request larger than the token cap, which went alone
    assert all(r <= 3 for _, r in seen)
    assert all(t <= 1000 or (t == 2500 and r == 1) for t, r in seen), seen
    summary = flow.summary()
    assert summary["requests"] == len(costs) and summary["throttles"] == 0
    assert summary["max_requests_in_flight_seen"] <= 3 and summary["max_tokens_in_flight_seen"] == 2500


def test_a_throttle_halves_once_per_round_then_answers_grow_the_limits_back() -> None:
    """Four requests of 1,000 tokens in flight, all pushed back at once: the limits halve once (4,000 tokens and 4
    requests in flight -> 2,000 / 2), each request waits its Retry-After (else the back-off's first second) and is
    admitted again within the halved limits; then each window of answers adds one request's worth, back to the caps.

    Every result of the worker threads is collected and asserted here, in the test's thread (an assert in a thread
    is only a warning to pytest; the suite also turns those into failures: pyproject's filterwarnings)."""
    said: list[str] = []
    waits: list[float] = []
    flow = FlowControl(
        FlowLimits(max_tokens_in_flight=8000, max_requests_in_flight=8), log=said.append, sleep=waits.append
    )
    slots = [flow.take_ticket(1000) for _ in range(4)]
    for s in slots:
        flow.admit(s)
    gate = threading.Barrier(4)
    sent_again: dict[int, bool] = {}
    after: dict[int, int] = {}
    failed: list[BaseException] = []

    def pushed_back(i: int) -> None:
        try:
            gate.wait()  # all four of one round are pushed back together
            sent_again[i] = flow.throttled(slots[i], 429, 2.0 if i == 0 else None)
            after[i] = flow._s.requests  # admitted again: within the halved limit
            time.sleep(0.02)
            flow.release(slots[i], ok=True)
        except BaseException as exc:  # handed to the test's thread, which fails on it
            failed.append(exc)

    threads = [threading.Thread(target=pushed_back, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not [t for t in threads if t.is_alive()] and failed == []
    assert sent_again == {0: True, 1: True, 2: True, 3: True}  # each admitted again, none out of patience
    assert sorted(after) == [0, 1, 2, 3] and max(after.values()) <= 2
    summary = flow.summary()
    assert summary["throttles"] == 4 and summary["decreases"] == 1  # the limits halved once, not four times
    assert summary["lowest_request_limit"] == 2 and summary["lowest_token_limit"] == 2000
    assert sorted(waits) == [1.0, 1.0, 1.0, 2.0]  # Retry-After honoured; else the back-off's first step
    halved = [s for s in said if "halved on HTTP 429" in s]
    assert len(halved) == 1 and halved[0].endswith(": 8000 tokens / 8 requests -> 2000 tokens / 2 requests"), said
    # answers grow the limits back one request's worth per window, up to the caps and no further: 2 -> 3 requests
    # after the four answers above (a window of 2), then 3 -> 8 in windows of 3, 4, 5, 6 and 7 answers
    for _ in range(300):
        s = flow.take_ticket(1000)
        flow.admit(s)
        flow.release(s, ok=True)
    summary = flow.summary()
    grown = [s for s in said if "grown" in s]
    assert summary["increases"] == 6 and len(grown) == 6, said
    assert grown[-1].endswith("-> 8000 tokens / 8 requests")
    assert flow._s.token_limit == 8000 and flow._s.request_limit == 8


def test_patience_spent_raises_and_releases_once() -> None:
    flow = FlowControl(FlowLimits(max_requests_in_flight=2, throttle_patience=3.0), sleep=lambda _: None)
    slot = flow.take_ticket(10)
    flow.admit(slot)
    assert flow.throttled(slot, 503, 2.0)
    assert not flow.throttled(slot, 503, 2.0)  # 4 s > 3 s of patience
    flow.release(slot, ok=False)  # already released: not twice
    assert flow._s.requests == 0 and flow._s.tokens == 0


def test_flow_limits_are_checked_and_records_sum() -> None:
    with pytest.raises(ValueError, match="max_tokens_in_flight"):
        FlowLimits(max_tokens_in_flight=0)
    with pytest.raises(ValueError, match="max_requests_in_flight"):
        FlowLimits(max_requests_in_flight=2.5)  # type: ignore[arg-type]
    assert not FlowLimits().active
    one = FlowControl(FlowLimits(max_requests_in_flight=2))
    s = one.take_ticket(5)
    one.admit(s)
    one.release(s, ok=True)
    first, second = one.summary(reset=True), one.summary(reset=True)
    assert first["requests"] == 1 and second["requests"] == 0
    total = flow_totals([first, second])
    assert total["requests"] == 1 and total["files"] == 2 and total["max_requests_in_flight_seen"] == 1
    assert flow_totals([]) is None


def test_the_api_models_flow_counts_prompts_by_the_plans_tokenizer_route(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flow's prompt counts load the model's tokenizer as the plan's room does (``limits.model_tokenizer``:
    ``tokenizer_path``, else ``path``, with the config's ``tokenizer_kwargs``), not by a route of its own."""
    from opencompass.utils.build import build_model_from_cfg

    from needlebench.opencompass.api import ResilientOpenAISDK
    from needlebench.opencompass.models import api_model
    from needlebench.planning import limits

    cfg = api_model(
        "api", "served", "http://127.0.0.1:1/v1", max_seq_len=8192, tokenizer_path="/tok", tokenizer_kwargs={"a": 1}
    )
    asked: list[tuple] = []

    def load(model: dict) -> tuple:
        asked.append(limits.model_tokenizer(model))
        return None, None, None

    monkeypatch.setattr(limits, "load_tokenizer", load)
    model = build_model_from_cfg(cfg)  # as OpenCompass's infer task builds it
    assert isinstance(model, ResilientOpenAISDK)
    assert model._prompt_tokens("one two three") == 3  # no tokenizer at hand: cl100k, a token a word
    assert asked == [limits.model_tokenizer(cfg)] == [("/tok", {"a": 1})]
