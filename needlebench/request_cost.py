"""What one request cost, as the engine or the clock says: the fact behind every cost number of a run.

The inferencer logs each answered request's cost from what the model wrapper measured (``runfolder/cost_log.py``:
apart from the prediction files, which stay OpenCompass's bytes and the same on every run), the evaluator reads
each sample's by its id, the graded record keeps it (``cost``, in ``samples.jsonl``), and the ledger
(``report/ledger.py``) adds the records of a cell up. A fact the engine did not report stays None:
never an estimate in its place, never a 0. A new fact is one field here, with how the ledger takes it over a
cell's requests, and the line that measures it.

Where each comes from:

* an OpenAI-compatible server (``api_model``): the clock around the request that answered (``wall_s``), and
  what the response says: ``usage.prompt_tokens``, ``usage.prompt_tokens_details.cached_tokens`` (vLLM with
  ``--enable-prompt-tokens-details``, SGLang with ``--enable-cache-report``, most providers), and vLLM's
  ``metrics`` (``--enable-per-request-metrics``): ``queue_time_ms``, ``time_to_first_token_ms`` (vLLM counts it
  from scheduling, so it is the prefill; the queue is apart) and ``generation_time_ms`` (the decode); the engine
  is ``openai-api`` and its version what the server's ``GET /version`` answers (vLLM does);
* an in-process engine (HuggingFace, kvpress, vLLM and LMDeploy through OpenCompass): the batch's clock, shared
  over its prompts by their length (``shared``), the batch's peak device memory where torch reports one, and
  the engine package's version; in-process vLLM also says, per request, what its ``RequestOutput`` carries: the
  prompt's tokens, ``num_cached_tokens``, and where stats are kept (``metrics``) the queue, first-token and
  decode times.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["LEDGER_WAYS", "RequestCost", "cache_share"]


# how the ledger takes a fact over a cell's requests
LEDGER_WAYS = ("sum", "quantiles", "max", "label", "any")


def _fact(ledger: str, read: type) -> Any:
    return field(default=None, metadata={"ledger": ledger, "read": read})


@dataclass(frozen=True)
class RequestCost:
    """What one request cost.

    Attributes:
        wall_s: seconds on the clock: the request that answered (a server), or the request's share of its
            batch (``shared``).
        shared: the wall time is the batch's, shared over its prompts by their length (an in-process engine
            answers a batch at once).
        queue_ms: milliseconds the request waited in the engine's queue (vLLM's ``queue_time_ms``).
        ttft_ms: milliseconds to the first token as the engine counts them (vLLM: from scheduling, the prefill).
        decode_ms: milliseconds from the first token to the last (vLLM's ``generation_time_ms``).
        prompt_tokens: the prompt's tokens as the engine counted them.
        cached_tokens: of those, the tokens the engine served from its prefix cache.
        peak_memory_mb: the batch's peak device memory (torch's ``max_memory_allocated``), MiB.
        engine: what answered (``openai-api``, or the in-process engine's package: ``transformers``, ``vllm``...).
        engine_version: its version (a server's ``GET /version``; the package's version).
    """

    wall_s: float | None = _fact("sum", float)
    shared: bool | None = _fact("any", bool)
    queue_ms: float | None = _fact("sum", float)
    ttft_ms: float | None = _fact("quantiles", float)
    decode_ms: float | None = _fact("sum", float)
    prompt_tokens: int | None = _fact("sum", int)
    cached_tokens: int | None = _fact("sum", int)
    peak_memory_mb: float | None = _fact("max", float)
    engine: str | None = _fact("label", str)
    engine_version: str | None = _fact("label", str)

    @property
    def computed_tokens(self) -> int | None:
        """The prompt tokens the engine prefilled (prompt less cached); None where it did not say both."""
        if self.prompt_tokens is None or self.cached_tokens is None:
            return None
        return self.prompt_tokens - self.cached_tokens

    def to_json(self) -> dict[str, Any]:
        """The facts that are set (a fact not reported is left out, never written as 0)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    @classmethod
    def from_json(cls, data: object) -> RequestCost | None:
        """A cost as :meth:`to_json` wrote it; None for anything else (an entry without one: an answer carried
        from an earlier run, a prediction file from before costs were kept). A value of the wrong type is
        dropped, not guessed.

        Args:
            data: the entry's ``needlebench_cost`` value.
        """
        if not isinstance(data, Mapping):
            return None
        found: dict[str, Any] = {}
        for f in fields(cls):
            value = data.get(f.name)
            if value is None or isinstance(value, bool) != (f.metadata["read"] is bool):
                continue
            try:
                found[f.name] = f.metadata["read"](value)
            except (TypeError, ValueError):
                continue
        return cls(**found) if found else None

    @classmethod
    def ledger_ways(cls) -> dict[str, str]:
        """Each fact's way into the ledger (:data:`LEDGER_WAYS`), by name."""
        return {f.name: f.metadata["ledger"] for f in fields(cls)}


def cache_share(costs: Sequence[RequestCost]) -> float | None:
    """The share of prompt tokens the engine served from its cache, over the requests that said both counts; None
    where none did (the ledger's ``cache share``, and the measured share a forecast takes off).

    Args:
        costs: the requests' costs.
    """
    both = [c for c in costs if c.computed_tokens is not None]
    prompt = sum(c.prompt_tokens or 0 for c in both)
    return sum(c.cached_tokens or 0 for c in both) / prompt if both and prompt else None
