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
"""

from __future__ import annotations

import threading
from typing import Any

from opencompass.models import OpenAISDK

from ..record import cut_prediction, failed_prediction, prediction_text, unanswered

__all__ = ["ResilientOpenAISDK", "keep_unanswered"]


class ResilientOpenAISDK(OpenAISDK):
    """``OpenAISDK`` whose exhausted retries yield a failed-request prediction instead of an exception, and
    whose answers cut off at the output budget carry the server's ``finish_reason``.

    Args:
        retry_passes: passes after an infer task's batches that ask its failed requests again (0: none;
            ``inferencer.BatchGenInferencer`` reads it).
        retry_waits: seconds to wait before each pass (the last repeats); each pass sends half as many
            requests at a time as the one before.
        kwargs: ``OpenAISDK``'s arguments.
    """

    def __init__(self, retry_passes: int = 0, retry_waits: tuple[float, ...] = (30.0, 120.0), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.retry_passes = retry_passes
        self.retry_waits = tuple(retry_waits)

    def _create_fresh_client(self) -> Any:
        """OpenCompass's client, whose chat completions note each answer's finish reason for this thread.

        ``OpenAISDK.generate`` sends a batch's requests from a thread pool, each request and its retries
        on one thread, so the reason noted last on a thread belongs to the answer that thread returns.
        """
        client = super()._create_fresh_client()
        self._finish = threading.local()
        completions = client.chat.completions
        create = completions.create
        finish = self._finish

        def noting_create(*args: Any, **kwargs: Any) -> Any:
            response = create(*args, **kwargs)
            choices = getattr(response, "choices", None)
            finish.reason = getattr(choices[0], "finish_reason", None) if choices else None
            return response

        completions.create = noting_create
        return client

    def _generate(
        self, input: Any, max_out_len: int, temperature: float, *args: Any, **kwargs: Any
    ) -> str | dict[str, str]:
        self._finish.reason = None
        try:
            text = super()._generate(input, max_out_len, temperature, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any failure of one request must not cost the others
            self.logger.error(f"request failed after {self.retry} tries, recorded as request_failed: {exc}")
            return failed_prediction(f"{type(exc).__name__}: {exc}")
        if getattr(self._finish, "reason", None) == "length" and isinstance(text, str):
            return cut_prediction(text, "length")
        return text


def keep_unanswered(prediction: Any, inner: dict[str, Any]) -> Any:
    """A model's ``pred_postprocessor`` that passes a failed request through untouched.

    OpenCompass applies a model config's postprocessor to every saved prediction before the
    evaluator sees them; a text postprocessor (``extract_non_reasoning_content``) would fail on
    the failed-request object. ``api_model`` and ``reasoning`` wrap a given postprocessor in this one.
    An answer a server cut off (:func:`~needlebench.record.cut_prediction`) is postprocessed as its
    text; the evaluator reads its finish reason from the saved prediction.

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
    return proc(prediction_text(prediction), **kwargs)
