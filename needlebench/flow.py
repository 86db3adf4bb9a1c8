"""Requests to a server admitted by the tokens they put in flight, and fewer of them after the server pushes back.

A provider limits tokens per minute and a self-hosted server queues or pre-empts what does not fit its KV
cache, so eight requests of 1M tokens are not eight requests of 4k. :class:`FlowControl` admits a request
when its cost (prompt plus output budget, in the model's tokens) fits the tokens and requests in flight
now allowed, in the order requests were handed to it (the partitioner's order, which the prefix cache
relies on), one request at a time past the limit when nothing else is in flight so a prompt larger than
the limit still goes. When the server answers a request with 429 or 503 (a throttling answer), the
limits halve, at most once per round of requests admitted under the same limits, and the request waits
for the server's ``Retry-After`` (else a doubling back-off) before it is admitted again, ahead of requests
not sent yet. After each full window of successes the limits grow by one request's worth, up to the
configured caps (additive increase, multiplicative decrease). Every change is logged with its reason,
and :meth:`FlowControl.summary` is what the run records, beside every model's batch size, requests in
flight and request order (``runfolder/request_log.py``; ``results.json`` sums them per model).

No OpenCompass here: ``opencompass.api.ResilientOpenAISDK`` drives it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "THROTTLE_STATUSES",
    "FlowControl",
    "FlowLimits",
    "Slot",
]

THROTTLE_STATUSES = (429, 503)  # answers that mean "fewer at a time", not "this request is broken"


@dataclass(frozen=True)
class FlowLimits:
    """How much an API model may have in flight (``models.api_model`` takes these).

    Attributes:
        max_tokens_in_flight: the cap on the prompt plus output tokens of the requests in flight (None: none).
        max_requests_in_flight: the cap on requests in flight (None: the batch size).
        throttle_patience: seconds one request may spend waiting on throttling answers before its next one is
            raised as a failure (a failed request is recorded and asked again as any other).
    """

    max_tokens_in_flight: int | None = None
    max_requests_in_flight: int | None = None
    throttle_patience: float = 900.0

    def __post_init__(self) -> None:
        for name in ("max_tokens_in_flight", "max_requests_in_flight"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a whole number >= 1 or None, got {value!r}")
        if not self.throttle_patience >= 0:
            raise ValueError(f"throttle_patience must be >= 0 seconds, got {self.throttle_patience!r}")

    @property
    def active(self) -> bool:
        """Whether any cap is set (without one, requests go as OpenCompass sends them)."""
        return self.max_tokens_in_flight is not None or self.max_requests_in_flight is not None


@dataclass
class Slot:
    """One request's place in the flow: its cost, its turn, the limits' round it was admitted in.

    Attributes:
        cost: prompt plus output tokens.
        ticket: its turn (lower goes first).
        round: the limits' round when it was last admitted (a throttle from an older round does not halve again).
        waited: seconds it has waited on throttling answers so far.
        throttles: throttling answers it met.
    """

    cost: int
    ticket: int
    round: int = 0
    waited: float = 0.0
    throttles: int = 0
    held: bool = False


@dataclass
class _State:
    """What the limiter knows now; one lock guards it."""

    token_limit: float
    request_limit: float
    tokens: int = 0
    requests: int = 0
    round: int = 0
    next_ticket: int = 0
    sent: int = 0  # requests handed over since the last summary
    waiting_again: set[int] = field(default_factory=set)  # tickets of throttled requests to admit first
    successes: int = 0  # since the last change
    window_cost: int = 0
    max_tokens: int = 0
    max_requests: int = 0
    throttles: int = 0
    decreases: int = 0
    increases: int = 0
    lowest_token_limit: float = math.inf
    lowest_request_limit: float = math.inf


class FlowControl:
    """Admits requests by tokens and requests in flight; halves on throttling, grows back on success.

    Args:
        limits: the caps (:class:`FlowLimits`).
        log: where each limit change is told, with its reason.
        sleep: how to wait (tests may pass a recorder).
    """

    def __init__(
        self,
        limits: FlowLimits,
        log: Callable[[str], None] = lambda _: None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.limits = limits
        self._log = log
        self._sleep = sleep
        self._cond = threading.Condition()
        # the caps the limits start at and grow back to (no cap: unbounded)
        self._token_cap = float(limits.max_tokens_in_flight or math.inf)
        self._request_cap = float(limits.max_requests_in_flight or math.inf)
        self._s = _State(token_limit=self._token_cap, request_limit=self._request_cap)

    def take_ticket(self, cost: int) -> Slot:
        """A request's place, in the order requests are handed over (call from the one thread that orders them).

        Args:
            cost: its prompt plus output tokens.
        """
        with self._cond:
            slot = Slot(cost=max(1, int(cost)), ticket=self._s.next_ticket)
            self._s.next_ticket += 1
            self._s.sent += 1
            return slot

    def admit(self, slot: Slot) -> None:
        """Block until ``slot`` may go: its turn has come and it fits (or nothing else is in flight).

        A throttled request waiting again goes before every request not sent yet.

        Args:
            slot: from :meth:`take_ticket`.
        """
        s = self._s
        with self._cond:
            again = slot.ticket in s.waiting_again
            while not self._fits(slot, again):
                self._cond.wait()
            s.waiting_again.discard(slot.ticket)
            slot.held = True
            s.tokens += slot.cost
            s.requests += 1
            slot.round = s.round
            s.max_tokens = max(s.max_tokens, s.tokens)
            s.max_requests = max(s.max_requests, s.requests)

    def _fits(self, slot: Slot, again: bool) -> bool:
        s = self._s
        if not again and s.waiting_again:
            return False
        if again and slot.ticket != min(s.waiting_again):
            return False
        if s.requests == 0:
            return True
        return s.requests + 1 <= s.request_limit and s.tokens + slot.cost <= s.token_limit

    def release(self, slot: Slot, ok: bool) -> None:
        """``slot``'s request is no longer in flight; an answer (``ok``) counts toward growing the limits back.

        Args:
            slot: the admitted request.
            ok: whether the server answered it (any answer that was not a throttling one).
        """
        with self._cond:
            if not self._let_go(slot):  # released already by a throttle whose patience was spent
                return
            if ok:
                self._grow(slot.cost)
            self._cond.notify_all()

    def _let_go(self, slot: Slot) -> bool:
        """Take ``slot`` out of the tokens and requests in flight; False when it was not in flight (lock held)."""
        if not slot.held:
            return False
        slot.held = False
        self._s.tokens -= slot.cost
        self._s.requests -= 1
        return True

    def _grow(self, cost: int) -> None:
        """After a window of successes (as many as the request limit allows), one request's worth more."""
        s = self._s
        s.successes += 1
        s.window_cost += cost
        token_cap, request_cap = self._token_cap, self._request_cap
        if s.token_limit >= token_cap and s.request_limit >= request_cap:
            s.successes, s.window_cost = 0, 0
            return
        window = max(1, int(min(s.request_limit, 1e9)))
        if s.successes < window:
            return
        step = s.window_cost / s.successes
        before = self._limits_text()
        s.token_limit = min(token_cap, s.token_limit + step)
        s.request_limit = min(request_cap, s.request_limit + 1)
        s.successes, s.window_cost = 0, 0
        s.increases += 1
        self._log(f"flow limits grown after {window} answers in a row: {before} -> {self._limits_text()}")

    def throttled(self, slot: Slot, status: int, retry_after: float | None) -> bool:
        """The server pushed back on ``slot``'s request: lower the limits, wait, and admit it again.

        Args:
            slot: the admitted request (released here, admitted again before returning True).
            status: the HTTP status (429 or 503).
            retry_after: the server's ``Retry-After`` in seconds, if it sent one.

        Returns:
            True when the request may be sent again; False when its patience is spent (it stays released).
        """
        s = self._s
        with self._cond:
            s.throttles += 1
            slot.throttles += 1
            if not self._let_go(slot):  # its patience was spent before: no more waiting
                return False
            if slot.round == s.round:  # the first push-back of this round halves; the rest of it does not
                before = self._limits_text()
                s.token_limit = max(1.0, min(s.token_limit, s.tokens + slot.cost) / 2)
                s.request_limit = max(1.0, math.floor(min(s.request_limit, s.requests + 1) / 2))
                s.lowest_token_limit = min(s.lowest_token_limit, s.token_limit)
                s.lowest_request_limit = min(s.lowest_request_limit, s.request_limit)
                s.round += 1
                s.decreases += 1
                s.successes, s.window_cost = 0, 0
                said = f"Retry-After {retry_after:g} s" if retry_after is not None else "no Retry-After"
                self._log(f"flow limits halved on HTTP {status} ({said}): {before} -> {self._limits_text()}")
            wait = retry_after if retry_after is not None else min(60.0, 2.0 ** (slot.throttles - 1))
            if slot.waited + wait > self.limits.throttle_patience:
                self._cond.notify_all()
                return False
            slot.waited += wait
            s.waiting_again.add(slot.ticket)
            self._cond.notify_all()
        self._sleep(wait)
        self.admit(slot)
        return True

    def _limits_text(self) -> str:
        s = self._s
        tokens = "unbounded" if math.isinf(s.token_limit) else f"{int(s.token_limit)}"
        requests = "unbounded" if math.isinf(s.request_limit) else f"{int(s.request_limit)}"
        return f"{tokens} tokens / {requests} requests"

    @property
    def throttles(self) -> int:
        """Throttling answers met since the record was last reset (:meth:`summary`), read while requests run."""
        with self._cond:
            return self._s.throttles

    def summary(self, reset: bool = False) -> dict[str, Any]:
        """What a run records of this limiter: its settings, the throttling answers, the limits' extremes.

        ``max_tokens_in_flight_seen`` never exceeds the cap unless one request alone is larger than it
        (``max_requests_in_flight_seen`` is then 1 at that moment).

        Args:
            reset: start the counts again (one infer task answers several prediction files with one model;
                each file records its own share).
        """
        s = self._s

        def whole(x: float) -> int | None:
            return None if math.isinf(x) else int(x)

        with self._cond:
            out = {
                "settings": asdict(self.limits),
                "requests": s.sent,
                "throttles": s.throttles,
                "decreases": s.decreases,
                "increases": s.increases,
                "max_tokens_in_flight_seen": s.max_tokens,
                "max_requests_in_flight_seen": s.max_requests,
                "lowest_token_limit": whole(s.lowest_token_limit),
                "lowest_request_limit": whole(s.lowest_request_limit),
            }
            if reset:
                s.sent = s.throttles = s.decreases = s.increases = 0
                s.max_tokens, s.max_requests = s.tokens, s.requests
                s.lowest_token_limit = s.lowest_request_limit = math.inf
            return out
