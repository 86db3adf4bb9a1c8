"""OpenCompass's OpenAI-compatible API model, made safe for long unattended runs.

OpenCompass's ``OpenAISDK`` retries a failing request (and the ``openai``
client under it retries 429/5xx and connection errors with back-off, honouring
``Retry-After``), then raises, which kills the whole inference task and every
prediction of its batch. Here a request that never succeeds becomes a structured
prediction instead (:func:`~needlebench.record.failed_prediction`, a JSON
object OpenCompass saves and hands to the evaluator as it is): the evaluator records
the sample unscored as ``request_failed``, apart from wrong answers and out of every
score, and the other samples are kept.
"""

from __future__ import annotations

from typing import Any

from opencompass.models import OpenAISDK

from ..record import failed_prediction, unanswered

__all__ = ["ResilientOpenAISDK", "keep_unanswered"]


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


def keep_unanswered(prediction: Any, inner: dict[str, Any]) -> Any:
    """A model's ``pred_postprocessor`` that passes a failed request through untouched.

    OpenCompass applies a model config's postprocessor to every saved prediction before the
    evaluator sees them; a text postprocessor (``extract_non_reasoning_content``) would fail on
    the failed-request object. ``api_model`` wraps a given postprocessor in this one.

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
    return proc(prediction, **kwargs)
