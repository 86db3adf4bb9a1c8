"""OpenCompass's OpenAI-compatible API model, made safe for long unattended runs.

OpenCompass's ``OpenAISDK`` retries a failing request (and the ``openai``
client under it retries 429/5xx and connection errors with back-off, honouring
``Retry-After``), then raises, which kills the whole inference task and every
prediction of its batch. Here a request that never succeeds becomes a marked
prediction instead: the evaluator records it as ``request_failed``, kept apart
from wrong answers and out of every score, and the other samples are kept.
"""

from __future__ import annotations

from typing import Any

from opencompass.models import OpenAISDK

from ..grading.graders import REQUEST_FAILED, request_failure

__all__ = ["ResilientOpenAISDK", "REQUEST_FAILED", "request_failure"]


class ResilientOpenAISDK(OpenAISDK):
    """``OpenAISDK`` whose exhausted retries yield a ``request_failed`` marker instead of an exception."""

    def _generate(self, input: Any, max_out_len: int, temperature: float, *args: Any, **kwargs: Any) -> str:
        try:
            return super()._generate(input, max_out_len, temperature, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any failure of one request must not cost the others
            self.logger.error(f"request failed after {self.retry} tries, recorded as request_failed: {exc}")
            return f"{REQUEST_FAILED}{type(exc).__name__}: {exc}"[:2000]
