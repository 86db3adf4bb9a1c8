"""What needlebench's API model adds to OpenCompass's ``OpenAISDK``, declared once.

``models.api_model`` takes each option by name and writes it into the model config; ``api.ResilientOpenAISDK``
(the class the config names) reads the same options back from its keyword arguments. Free of OpenCompass imports:
a config is checked on machines without the engines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..errors import ConfigError
from ..flow import FlowLimits
from ..placement import place_budget

__all__ = ["API_OPTIONS", "ApiOptions"]


@dataclass(frozen=True)
class ApiOptions:
    """The options of an OpenAI-compatible API model beyond ``OpenAISDK``'s.

    Args:
        key_env: the environment variable that holds the API key (comma-separated keys are used in turn), read
            when each request is sent, never when the config loads: the config, OpenCompass's dump of it and its
            task files name the variable only. An unset variable stops the run with one message naming it, before
            the first request (and, in a task, before its next one; answers saved are kept). None: the model's
            ``key``.
        tokenizer_kwargs: the keyword arguments the model's tokenizer (``tokenizer_path``) loads with, as a local
            model's config gives them: the plan's room and the flow's token counts both load it so
            (``limits.model_tokenizer``).
        retry_passes: after an infer task's batches, passes that ask its failed requests again (0: none). A resume
            (``opencompass CONFIG -r``, ``needlebench retry RUN``) asks again what still failed.
        retry_waits: seconds before each pass (the last repeats); ``Retry-After`` is honoured by the client within
            each pass. Each pass sends half as many requests at a time as the one before.
        max_tokens_in_flight: the most prompt plus output tokens in flight at once (None: no cap); a batch's
            requests are admitted in order as they fit, so long prompts go out fewer at a time.
        max_requests_in_flight: the most requests in flight at once (None: a batch's all at once). With either
            cap, a 429/503 halves the limits (honouring ``Retry-After``) and answers grow them back; each change
            is logged and ``results.json`` counts them (``needlebench.flow``).
        throttle_patience: seconds one request may wait on 429/503 answers before it counts as failed.
        thinking_budget: the most tokens the model may reason before it answers, asked of the server with each
            request (None: none asked). Each answer keeps it with the reasoning tokens the server reports; one that
            reasoned past it is flagged "thinking budget not enforced" in every table. Before the first prompt, the
            server is asked once whether it takes the field.
        thinking_field: how the server spells the budget (``placement.THINKING_FIELDS``): ``"vllm"``
            (``thinking_token_budget``), ``"chat_template"`` (``chat_template_kwargs.thinking_budget``: SGLang and
            vLLM pass it to the chat template, which may ignore it) or ``"nim"`` (``nvext.max_thinking_tokens``).
    """

    key_env: str | None = None
    tokenizer_kwargs: Mapping[str, Any] | None = None
    retry_passes: int = 2
    retry_waits: tuple[float, ...] = (30.0, 120.0)
    max_tokens_in_flight: int | None = None
    max_requests_in_flight: int | None = None
    throttle_patience: float = 900.0
    thinking_budget: int | None = None
    thinking_field: str = field(default="vllm")

    @classmethod
    def take(cls, kwargs: dict[str, Any], abbr: str = "model") -> ApiOptions:
        """The options among ``kwargs``, taken out of it (the rest are ``OpenAISDK``'s), checked.

        Args:
            kwargs: a model's keyword arguments; the options are removed from it.
            abbr: the model's name, for the message.

        Raises:
            ConfigError: flow limits out of range, a thinking budget that is not a whole number of tokens, an
                unknown ``thinking_field``.
        """
        found = cls(**{name: kwargs.pop(name) for name in API_OPTIONS if name in kwargs})
        try:
            found.flow_limits  # noqa: B018 - checked now, as a config error
        except ValueError as exc:
            raise ConfigError(f"api_model({abbr!r}): {exc}") from None
        if found.thinking_budget is not None:
            place_budget(abbr, found.thinking_budget, found.thinking_field, None)
        return found

    @property
    def flow_limits(self) -> FlowLimits:
        """The caps on what is in flight (:mod:`needlebench.flow`)."""
        return FlowLimits(self.max_tokens_in_flight, self.max_requests_in_flight, float(self.throttle_patience))

    @property
    def answer_facts(self) -> dict[str, Any]:
        """What every answer records of what its request asked (the thinking budget); empty when nothing was."""
        return {} if self.thinking_budget is None else {"thinking_budget": self.thinking_budget}

    def config(self, abbr: str, extra_body: Mapping[str, Any] | None) -> dict[str, Any]:
        """The model config keys these options write: the retries always, the rest where set (a thinking budget
        also as its request body field).

        Args:
            abbr: the model's name, for the message.
            extra_body: the request body fields the model already sends.
        """
        out: dict[str, Any] = {"retry_passes": self.retry_passes, "retry_waits": tuple(self.retry_waits)}
        if self.key_env is not None:
            out["key_env"] = str(self.key_env)
        if self.flow_limits.active:
            out.update(
                max_tokens_in_flight=self.max_tokens_in_flight,
                max_requests_in_flight=self.max_requests_in_flight,
                throttle_patience=float(self.throttle_patience),
            )
        if self.thinking_budget is not None:
            out.update(place_budget(abbr, self.thinking_budget, self.thinking_field, extra_body))
        if self.tokenizer_kwargs:
            out["tokenizer_kwargs"] = dict(self.tokenizer_kwargs)
        return out


API_OPTIONS = tuple(f.name for f in fields(ApiOptions))
