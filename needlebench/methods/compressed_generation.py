"""Prefill under a KV-cache press, decode greedily, and say what the cache really kept.

Why our own loop and not kvpress's pipeline: the pipeline applies its own chat template split and its own
stop rule; a NeedleBench prompt must reach the model as the plain HuggingFace model gets it (the same
tokens, from OpenCompass's chat template), and the question's start comes from the dataset row. The loop
follows the pipeline's order: ``"agnostic"`` prefills the context under the press (the model body alone),
then the question with positions continuing from the uncompressed context, then decodes; ``"aware"``
prefills the whole prompt under the press. Greedy decoding stops at the model's end tokens, at a stop
text, or at the output budget; with the press off (ratio 0) the tokens are the plain model's
(``tests/test_kv_press.py`` compares them byte for byte).

What the cache kept is counted per layer. A press that drops entries leaves fewer in the cache; a head-wise
press (kvpress's ``AdaKVPress``, ``CriticalAdaKVPress``, ``DuoAttentionPress``, ...) keeps the cache whole
and names the entries each head no longer attends to in the attention module's ``masked_key_indices``
(kvpress's ``attention_patch`` replaces their keys while the question and the answer are computed). Those
entries are not kept: a layer's count is its cache length less its masked entries over its KV heads.

torch and transformers are imported by the functions that use them: this module sits below every layer
that plans or reports, which must not import them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["KeptCache", "Generated", "generate_compressed", "delimiter_id"]


@dataclass(frozen=True)
class KeptCache:
    """What the cache held after the press ran (one sample).

    Attributes:
        compressed_tokens: the prompt tokens prefilled under the press (the context, or the whole prompt).
        kept: the cache entries each layer kept of them, per KV head: the cache length less the entries a
            head-wise press masked over the layer's KV heads (a mean with two decimals where heads differ).
        question_tokens: the tokens prefilled after compression, uncompressed (the question; 0 when aware).
        after_question: each layer's cache entries once the question was prefilled, counted alike.
    """

    compressed_tokens: int
    kept: tuple[int | float, ...]
    question_tokens: int
    after_question: tuple[int | float, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON data: a per-layer list folded into one number where every layer kept the same."""

        def fold(values: tuple[int | float, ...]) -> int | float | list[int | float]:
            return values[0] if values and len(set(values)) == 1 else list(values)

        return {
            "compressed_tokens": self.compressed_tokens,
            "kept": fold(self.kept),
            "question_tokens": self.question_tokens,
            "after_question": fold(self.after_question),
        }


@dataclass(frozen=True)
class Generated:
    """One greedy answer: its token ids, why it ended (``"stop"`` or ``"length"``) and the cache kept."""

    ids: list[int]
    finish: str
    cache: KeptCache


def delimiter_id(ids: Sequence[int], vocab_size: int) -> int:
    """A token id the prompt does not hold (the highest): FinchPress's delimiter between context and question.

    Why not kvpress's ``update_model_and_tokenizer``: it adds a token and resizes the model's embeddings,
    which changes every later answer's vocabulary; the delimiter's embedding is dropped by the press before
    the first layer, so any id absent from the prompt marks the place.

    Args:
        ids: the prompt's token ids.
        vocab_size: the model's vocabulary size.
    """
    present = set(ids)
    return next(i for i in range(vocab_size - 1, -1, -1) if i not in present)


def _clear_masks(model: Any) -> None:
    """Forget the head-wise masks an earlier prompt left on the attention modules (kvpress clears them only
    where its attention patch runs a prefill, which eager attention does not)."""
    for layer in model.model.layers:
        if getattr(layer.self_attn, "masked_key_indices", None) is not None:
            layer.self_attn.masked_key_indices = None


def _masked(model: Any) -> tuple[int, ...]:
    """Per layer, the cache entries (KV head, position) a head-wise press masked: 0 where none."""
    import torch

    out = []
    for layer in model.model.layers:
        found = getattr(layer.self_attn, "masked_key_indices", None)
        if found is None:
            out.append(0)
            continue
        _, heads, positions = found
        span = int(positions.max()) + 1 if positions.numel() else 1
        out.append(int(torch.unique(heads.long() * span + positions.long()).numel()))  # each entry once
    return tuple(out)


def _lengths(cache: Any, masked: tuple[int, ...]) -> tuple[int | float, ...]:
    """Per layer, the entries its cache holds per KV head, less those a head-wise press masked."""
    out: list[int | float] = []
    for i, layer in enumerate(cache.layers):
        length = int(cache.get_seq_length(i))
        if not masked[i]:
            out.append(length)
            continue
        kept = length - masked[i] / int(layer.keys.shape[1])
        out.append(int(kept) if kept.is_integer() else round(kept, 2))
    return tuple(out)


def generate_compressed(
    model: Any,
    context_ids: Sequence[int],
    question_ids: Sequence[int],
    press: Any,
    query: str,
    max_new_tokens: int,
    end_ids: set[int],
    stopped: Callable[[list[int]], bool],
) -> Generated:
    """One prompt's answer under a press.

    Args:
        model: a transformers causal LM (``model.model`` its body).
        context_ids: the prompt's tokens before its question.
        question_ids: the question's tokens (may be empty where the row gives no question offset and the
            mode is ``"aware"``).
        press: a kvpress press, or None (no compression).
        query: ``"agnostic"`` or ``"aware"``.
        max_new_tokens: the output budget.
        end_ids: token ids that end the answer (the model's end-of-sequence tokens).
        stopped: whether the tokens so far hold a stop text (OpenCompass's stop words).
    """
    import torch
    from transformers import DynamicCache

    device = model.device
    cache = DynamicCache()
    finch = type(press).__name__ == "FinchPress"
    rerotated = (finch and getattr(press, "rerotate_keys", False)) or type(press).__name__ == "KeyRerotationPress"
    pressing = press(model) if press is not None else contextlib.nullcontext()
    _clear_masks(model)
    with torch.no_grad():
        if query == "aware":
            ids = list(context_ids) + list(question_ids)
            if finch:
                press.delimiter_token_id = delimiter_id(ids, model.get_input_embeddings().num_embeddings)
                ids = list(context_ids) + [press.delimiter_token_id] + list(question_ids)
            with pressing:
                out = model(input_ids=torch.tensor([ids], device=device), past_key_values=cache, logits_to_keep=1)
            masked = _masked(model)
            kept = after = _lengths(cache, masked)
            compressed, asked = len(context_ids) + len(question_ids), 0
            position = cache.get_seq_length() if rerotated else compressed  # keys rotated to their new places
        else:
            with pressing:
                model.model(input_ids=torch.tensor([list(context_ids)], device=device), past_key_values=cache)
            masked = _masked(model)
            kept = _lengths(cache, masked)
            compressed, asked = len(context_ids), len(question_ids)
            start = cache.get_seq_length() if rerotated else compressed
            positions = torch.arange(start, start + asked, device=device).unsqueeze(0)
            out = model(
                input_ids=torch.tensor([list(question_ids)], device=device),
                past_key_values=cache,
                position_ids=positions,
                logits_to_keep=1,
            )
            after = _lengths(cache, masked)
            position = start + asked
        generated = [int(out.logits[0, -1].argmax())]
        while len(generated) < max_new_tokens and generated[-1] not in end_ids and not stopped(generated):
            out = model(
                input_ids=torch.tensor([[generated[-1]]], device=device),
                past_key_values=cache,
                position_ids=torch.tensor([[position + len(generated) - 1]], device=device),
            )
            generated.append(int(out.logits[0, -1].argmax()))
    ended = generated[-1] in end_ids or stopped(generated)
    return Generated(generated, "stop" if ended else "length", KeptCache(compressed, kept, asked, after))
