"""OpenCompass's OpenAI-compatible API model, made safe for long unattended runs.

OpenCompass's ``OpenAISDK`` retries a failing request (and the ``openai``
client under it retries 429/5xx and connection errors with back-off, honouring
``Retry-After``), then raises, which kills the whole inference task and every
prediction of its batch. Here a request that never succeeds becomes a structured
prediction instead (:func:`~needlebench.grading.record.failed_prediction`, a JSON
object OpenCompass saves and hands to the evaluator as it is): the evaluator records
the sample unscored as ``request_failed``, apart from wrong answers and out of every
score, and the other samples are kept.
"""

from __future__ import annotations

from typing import Any

from opencompass.models import OpenAISDK

from ..grading.record import failed_prediction

__all__ = ["ResilientOpenAISDK"]


class ResilientOpenAISDK(OpenAISDK):
    """``OpenAISDK`` whose exhausted retries yield a failed-request prediction instead of an exception."""

    def _generate(
        self, input: Any, max_out_len: int, temperature: float, *args: Any, **kwargs: Any
    ) -> str | dict[str, str]:
        try:
            return super()._generate(input, max_out_len, temperature, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any failure of one request must not cost the others
            self.logger.error(f"request failed after {self.retry} tries, recorded as request_failed: {exc}")
            return failed_prediction(f"{type(exc).__name__}: {exc}")
