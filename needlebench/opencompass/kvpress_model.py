"""OpenCompass's HuggingFace chat model under a kvpress KV-cache press (``models.kvpress_model``).

The model loads and renders prompts as ``HuggingFacewithChatTemplate`` does (same chat template, same
tokens, same stop words and decoding of the answer), then answers each prompt through
``methods.compressed_generation``: the prompt's tokens are split where its question starts. The inferencer passes
each row's question (the prompt's last ``meta["question_chars"]`` characters, after the document), never guessed
from the prompt's words; its last place in the turn is the cut (the template may add text after the row's prompt). Each answer is a structured prediction carrying the text,
how it ended and what the cache kept (``record.ModelAnswer.kv_cache``), which every record keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opencompass.models import HuggingFacewithChatTemplate
from opencompass.models.huggingface_above_v4_33 import _convert_chat_messages

from ..errors import ConfigError
from ..methods.compressed_generation import generate_compressed
from ..methods.kv_press import AWARE_ONLY, PressSpec, build_press, check_press
from ..record import ModelAnswer

__all__ = ["KVPressModel"]

# marks the question's start in the rendered chat text; taken out before tokenizing (private-use characters)
_MARK = "\ue000needlebench-question\ue001"


class KVPressModel(HuggingFacewithChatTemplate):
    """``HuggingFacewithChatTemplate`` whose prompts are prefilled under a KV-cache press.

    Args:
        path: HuggingFace model id or local folder.
        kv_press: the method (``methods.kv_press.PressSpec.to_dict``); checked before the model loads.
        **kwargs: ``HuggingFacewithChatTemplate``'s arguments.
    """

    def __init__(self, path: str, kv_press: dict[str, Any], **kwargs: Any) -> None:
        spec = PressSpec.of(kv_press)
        check_press(spec)  # an unknown press or mode: one line, before the weights load
        super().__init__(path, **kwargs)
        self.spec = spec
        self.press = build_press(spec)

    def generate(
        self,
        inputs: list[Any],
        max_out_len: int,
        min_out_len: int | None = None,
        stopping_criteria: Sequence[str] = (),
        questions: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> list[dict[str, Any]]:
        """Answer each prompt under the press, one at a time (kvpress compresses one sequence).

        Args:
            inputs: the prompts (OpenCompass's parsed templates).
            max_out_len: the output budget in tokens.
            min_out_len: not taken (OpenCompass's HuggingFace model passes it on to ``generate``).
            stopping_criteria: stop texts besides the model's own.
            questions: per prompt, its question (the dataset row's prompt's last ``meta["question_chars"]``
                characters); None where a row does not say.
            kwargs: further generation settings, which a greedy press run does not take.

        Raises:
            ConfigError: a query-agnostic press on a row that does not say where its question starts.
        """
        stops = sorted(set(stopping_criteria) | set(self.stop_words))
        config = self.model.generation_config.eos_token_id
        end_ids = {int(i) for i in (config if isinstance(config, list) else [config]) if i is not None}
        if self.tokenizer.eos_token_id is not None:
            end_ids.add(int(self.tokenizer.eos_token_id))
        width = max((len(self.tokenizer.encode(s, add_special_tokens=False)) for s in stops), default=0) + 2

        def stopped(ids: list[int]) -> bool:
            tail = self.tokenizer.decode(ids[-width:])
            return any(s in tail for s in stops)

        marks = list(questions) if questions is not None else [None] * len(inputs)
        answers = []
        for messages, asked in zip(_convert_chat_messages(inputs), marks, strict=True):
            context, question = self._split(messages, asked)
            done = generate_compressed(
                self.model, context, question, self.press, self.spec.query, max_out_len, end_ids, stopped
            )
            text = self.tokenizer.decode(done.ids)
            for stop in stops:
                text = text.split(stop)[0]
            kept = {**self.spec.to_dict(), **done.cache.to_dict()}
            answers.append(ModelAnswer(text, finish=done.finish, kv_cache=kept).to_prediction())
        return answers

    def _split(self, messages: list[dict[str, str]], question: str | None) -> tuple[list[int], list[int]]:
        """The prompt's tokens as the plain model gets them, cut where its question starts.

        The question is found last in the last user turn (the template may add text after it). The chat text is
        rendered twice, once as the plain model renders it and once with a mark before the question; the mark's
        place is the cut, and the tokens are the plain text's, the cut falling before the first token that
        reaches past it.
        """
        plain = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        encoded = self.tokenizer(plain, add_special_tokens=False, return_offsets_mapping=question is not None)
        ids = list(encoded["input_ids"])
        if question is None:
            if self.spec.query == "agnostic" or self.spec.press in AWARE_ONLY:  # Finch's window is the question
                raise ConfigError(
                    f"{self.spec.press} query={self.spec.query!r}: this dataset's rows do not say where their "
                    "question starts (meta question_chars: a question placed before the document, or a reference "
                    "frame that does not end with it); run it with query='aware'"
                )
            return ids, []
        last = max(i for i, m in enumerate(messages) if m["role"] == "user")
        content = messages[last]["content"]
        start = content.rfind(question) if question else -1
        if start < 0:
            raise ConfigError(f"the row's question ({len(question)} characters) is not in the last user turn")
        marked = [dict(m) for m in messages]
        marked[last]["content"] = content[:start] + _MARK + content[start:]
        text = self.tokenizer.apply_chat_template(marked, add_generation_prompt=True, tokenize=False)
        before, found, after = text.partition(_MARK)
        if not found or _MARK in after or before + after != plain:
            raise ConfigError("the chat template changed the question's mark; the question's start cannot be placed")
        cut = len(before)
        offsets = encoded["offset_mapping"]
        at = next((i for i, (_, end) in enumerate(offsets) if end > cut), len(ids))
        return ids[:at], ids[at:]
