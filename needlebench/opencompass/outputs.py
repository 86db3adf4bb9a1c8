"""Reasoning models, measured as OpenCompass measures them: its think strip, and how the eval stage counts outputs.

OpenCompass's reasoning-model configs (``configs/models/deepseek/*r1*``, about 40 of them) attach
``pred_postprocessor=dict(type=extract_non_reasoning_content)`` to the model, and its eval task applies it
before the dataset's evaluator. ``models.reasoning()`` attaches the same function, so a run scores what
OpenCompass would; :func:`reference_strip` is that function for ``strip_think=True`` on reference samples
(the grading core takes it as ``ScoreOptions.reference_strip``: only this layer imports OpenCompass).

How outputs are counted (``output_tokens``, ``truncated``: :mod:`needlebench.grading.outputs`): the
partitioner's eval stage writes the evaluator's settings into each needlebench dataset of the eval task
config it renders, read from the run's plan (``Limit.evaluator_settings``: the model's tokenizer, found by
the same rule as for its room, and the output budget), and the evaluator builds its
:class:`~needlebench.grading.outputs.OutputMeter` from them (:func:`output_meter`). Nothing else carries
them: an eval task config says how its outputs were counted.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from typing import Any

from opencompass.utils.text_postprocessors import extract_non_reasoning_content

from ..grading.outputs import OutputMeter, tiktoken_meter
from ..planning.limits import tokenizer_readable

__all__ = [
    "reference_strip",
    "is_reasoning_model",
    "output_meter",
]

log = logging.getLogger(__name__)

_OPEN, _CLOSE = "<think>", "</think>"


def reference_strip(text: str) -> str:
    """OpenCompass's ``extract_non_reasoning_content(text)``, called so that it stays linear in the text.

    OpenCompass removes every ``<think>(.*?)</think>`` (case-sensitive, lazy) and strips the rest; a text
    with a ``</think>`` but no ``<think>`` keeps what follows the last ``</think>``. Its regex tries every
    ``<think>`` after the last ``</think>`` and scans to the end for a closing tag that is not there, so
    k such openings cost k scans: a run of unclosed tags is quadratic. They never match, so where there are
    two or more, the function is called on the text before them with one ``<think>`` appended (which keeps
    its regex branch and matches nothing), the appended tag dropped and the rest joined back as it was,
    stripped as it strips. Same result (``tests/test_differential_scoring.py`` checks it against the plain
    call); every other text goes to the function as it is.

    Args:
        text: the whole output as the model wrote it.
    """
    last = text.rfind(_CLOSE)
    start = last + len(_CLOSE) if last >= 0 else 0
    if text.count(_OPEN, start) < 2:
        return extract_non_reasoning_content(text)
    head = extract_non_reasoning_content(text[:start] + _OPEN)
    return (head[: -len(_OPEN)] + text[start:]).strip()


def is_reasoning_model(model: Mapping[str, Any]) -> bool:
    """Whether a model config is set up as a reasoning model: its ``pred_postprocessor`` is OpenCompass's think
    strip (as ``models.reasoning()`` and OpenCompass's own reasoning-model configs set it), bare or wrapped.

    Args:
        model: the model config.
    """
    proc = model.get("pred_postprocessor") or {}
    while isinstance(proc, Mapping):
        kind = proc.get("type")
        if _names_extract(kind):
            return True
        proc = proc.get("inner")
    return False


def _names_extract(kind: Any) -> bool:
    """Whether a postprocessor ``type`` is ``extract_non_reasoning_content`` (function, dotted path or registry name)."""
    if kind is extract_non_reasoning_content:
        return True
    name = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    return name.rsplit(".", 1)[-1] in ("extract_non_reasoning_content", "extract-non-reasoning-content")


def output_meter(tokenizer: str | None, kwargs: Mapping[str, Any] | None, max_out_len: int | None) -> OutputMeter:
    """How an evaluator counts its outputs: the model's own tokenizer where it loads, else cl100k.

    The tokenizer is read from a local folder, or from the Hugging Face cache where the infer stage put
    it (``local_files_only``: nothing is downloaded). Where none loads, outputs are counted in cl100k,
    the records say so, and only a server's ``finish_reason`` marks an output cut off.

    Args:
        tokenizer: the model's tokenizer path or hub name (the plan's ``Limit.output_tokenizer``); None: cl100k.
        kwargs: the model config's ``tokenizer_kwargs`` (a GGUF file, ``trust_remote_code``, ...).
        max_out_len: the output budget.
    """
    tok = _load(tokenizer, json.dumps(dict(kwargs or {}), sort_keys=True)) if tokenizer_readable(tokenizer) else None
    if tok is None:
        if tokenizer_readable(tokenizer):
            log.warning(
                "outputs are counted in cl100k: no tokenizer of the model loads from %r, so an in-process "
                "model's cut-off outputs cannot be told by their token count (an API's finish_reason still is)",
                tokenizer,
            )
        return tiktoken_meter(max_out_len)

    def count(text: str) -> int:
        return len(tok(text.encode("utf-8", "replace").decode("utf-8"), add_special_tokens=False)["input_ids"])

    return OutputMeter(count, str(tokenizer), own_tokens=True, max_out_len=max_out_len)


@functools.lru_cache(maxsize=4)
def _load(path: str, kwargs: str) -> Any:
    """A transformers tokenizer from a folder or the local Hugging Face cache; None where none loads.

    Loaded once per eval task process (an eval task scores several datasets of one model, each with its own
    evaluator): a tokenizer read from a GGUF file takes about 17 s to convert on this project's machine.

    Args:
        path: the folder or hub name.
        kwargs: the ``tokenizer_kwargs`` as sorted JSON (hashable).
    """
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path, local_files_only=True, **json.loads(kwargs))
    except Exception as exc:  # transformers raises many kinds for a missing or broken tokenizer; all mean "none"
        log.info("no tokenizer at %r (%s: %s)", path, type(exc).__name__, exc)
        return None
