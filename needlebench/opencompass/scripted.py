"""Scripted models for checking an install: an oracle that answers every prompt with its gold,
and a garbage model that answers hostile text.

A run with both must show the oracle at 100 and the garbage model at 0 in every table; any
other number means the pipeline (generation, sharding, prompt templates, grading, merging,
summarising) lost or mixed up samples. Both are API-style models: no weights, no compute.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

from opencompass.models.base import BaseModel
from opencompass.models.base_api import APITemplateParser

from ..grading.matching import hostile_outputs
from ..tasks import get_task
from . import dataset

__all__ = ["OracleModel", "GarbageModel", "API_META_TEMPLATE", "last_human_message", "GARBAGE_OUTPUTS"]

# OpenCompass's usual API meta template: the model receives the dialogue as role-tagged messages
# (a PromptList), so the oracle can read the last user turn exactly, with no template text around it.
API_META_TEMPLATE = dict(
    round=[dict(role="HUMAN", api_role="HUMAN"), dict(role="BOT", api_role="BOT", generate=True)],
    reserved_roles=[dict(role="SYSTEM", api_role="SYSTEM")],
)

# The garbage model's rotation: hostile outputs, 200 kB at most so runs stay fast. Left out: lone
# surrogates (no UTF-8 prediction file can hold them) and the "## Answer:" run, whose capital A is
# a fair answer "A" to the multiple-choice task; "## answer: 4x" tests the marker instead.
GARBAGE_OUTPUTS = (
    "noise",
    "boxed_unclosed",
    "nul_bytes",
    "cjk_repeated",
    "answer_4x",
    "think_unclosed",
    "boxed_nested",
    "digits",
    "boxed_digits",
    "marker_then_spaces",
)


def last_human_message(prompt: Any) -> str:
    """The text of the last HUMAN turn of a prompt (a plain string is its own last turn).

    Args:
        prompt: a string, or an OpenCompass PromptList (a list of ``{"role", "prompt"}`` dicts).

    Raises:
        ValueError: the prompt has no HUMAN turn.
    """
    if isinstance(prompt, str):
        return prompt
    for item in reversed(list(prompt)):
        if isinstance(item, dict) and item.get("role") == "HUMAN":
            return str(item.get("prompt", ""))
    raise ValueError(f"prompt has no HUMAN turn: {str(prompt)[:80]!r}")


class _ScriptedModel(BaseModel):
    """An API-style model whose answers are computed, not generated.

    Args:
        path: a label (no weights are read).
        max_seq_len: the context it claims (large, so no prompt is ever cut).
        meta_template: OpenCompass meta template; default ``API_META_TEMPLATE``.
        delay: seconds to wait per call, so a test has a running inference to kill.
        record: a file to append one JSON line per call to: when it ran, in which Slurm job, with which
            ``CUDA_VISIBLE_DEVICES``, so a test can check what the scheduler gave each job.
    """

    is_api = True

    def __init__(
        self,
        path: str = "scripted",
        max_seq_len: int = 2_000_000,
        meta_template: dict | None = None,
        delay: float = 0.0,
        record: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(path=path, max_seq_len=max_seq_len, meta_template=meta_template)
        self.template_parser = APITemplateParser(meta_template or API_META_TEMPLATE)
        self.delay = delay
        self.record = record

    def get_token_len(self, prompt: Any) -> int:
        """A rough token count (4 characters a token): OpenCompass only uses it to decide truncation.

        Args:
            prompt: a string or a PromptList.
        """
        if isinstance(prompt, str):
            return len(prompt) // 4
        return sum(len(str(item.get("prompt", ""))) for item in prompt if isinstance(item, dict)) // 4

    def generate(self, inputs: list[Any], max_out_len: int, **kwargs: Any) -> list[str]:
        """One scripted answer per prompt (the output budget does not apply: nothing is generated).

        Args:
            inputs: prompts as OpenCompass passes them.
            max_out_len: the output budget (unused).
            kwargs: further OpenCompass arguments (ignored).
        """
        start = time.time()
        if self.delay:
            time.sleep(self.delay)
        answers = [self.answer(prompt) for prompt in inputs]
        if self.record:
            env = os.environ
            line = dict(start=start, end=time.time(), prompts=len(inputs), pid=os.getpid())
            line.update(job=env.get("SLURM_JOB_ID"), name=env.get("SLURM_JOB_NAME"))
            line.update(cuda=env.get("CUDA_VISIBLE_DEVICES"))
            with open(self.record, "a", encoding="utf-8") as fh:  # one short append per call
                fh.write(json.dumps(line) + "\n")
        return answers

    def answer(self, prompt: Any) -> str:
        """The answer to one prompt (subclasses decide)."""
        raise NotImplementedError


class OracleModel(_ScriptedModel):
    """Answers each prompt with its task's ``oracle`` applied to the prompt's gold.

    The gold is found by the exact text of the prompt's last HUMAN turn among the rows of every
    needlebench dataset loaded in this process (OpenCompass builds the datasets in the process
    that runs the model), indexed lazily as datasets appear. A prompt found nowhere, or in two
    rows with different golds, is an error naming its first 80 characters: never a wrong answer.

    The index holds a 16-byte digest of each prompt, not the prompt, and reads the rows a batch at a
    time: a 1000k dataset holds gigabytes of prompts, which the memory-mapped file keeps on disk.

    Args:
        path: a label.
        kv_bytes_per_token: memory held per prompt token answered so far in this process (0: none), a
            stand-in for a serving engine's KV and prefix cache, which grows with the context it has seen:
            a memory-capped run then fails in its infer stage, as a real long-context model would.
        kwargs: see ``_ScriptedModel``.
    """

    def __init__(self, path: str = "oracle", kv_bytes_per_token: int = 0, **kwargs: Any) -> None:
        super().__init__(path=path, **kwargs)
        self._golds: dict[bytes, tuple[str, str]] = {}
        self._ambiguous: set[bytes] = set()
        self._indexed = 0
        self.kv_bytes_per_token = kv_bytes_per_token
        self._kv: list[bytearray] = []

    def _index_new_datasets(self) -> None:
        for ds in dataset.LOADED[self._indexed :]:
            for batch in ds.select_columns(["prompt", "task", "answer"]).iter(batch_size=256):
                for prompt, task, gold in zip(batch["prompt"], batch["task"], batch["answer"], strict=True):
                    key = _digest(prompt)
                    if self._golds.setdefault(key, (task, gold)) != (task, gold):
                        self._ambiguous.add(key)
        self._indexed = len(dataset.LOADED)

    def generate(self, inputs: list[Any], max_out_len: int, **kwargs: Any) -> list[str]:
        """The oracle's answers; with ``kv_bytes_per_token``, first take (and write) that memory per prompt token.

        Args:
            inputs: prompts as OpenCompass passes them.
            max_out_len: the output budget (unused).
            kwargs: further OpenCompass arguments (ignored).
        """
        if self.kv_bytes_per_token:
            tokens = sum(self.get_token_len(prompt) for prompt in inputs)
            self._kv.append(bytearray(b"\x01") * (tokens * self.kv_bytes_per_token))  # written: resident
        return super().generate(inputs, max_out_len, **kwargs)

    def answer(self, prompt: Any) -> str:
        """The perfect answer to one prompt.

        Args:
            prompt: as OpenCompass passes it (a string or a PromptList).

        Raises:
            LookupError: no loaded dataset holds the prompt, or two hold it with different golds.
        """
        text = last_human_message(prompt)
        key = _digest(text)
        if key not in self._golds:
            self._index_new_datasets()
        if key not in self._golds:
            raise LookupError(f"oracle: no loaded needlebench dataset holds the prompt {text[:80]!r}")
        if key in self._ambiguous:
            raise LookupError(f"oracle: rows with different golds share the prompt {text[:80]!r}")
        task, gold = self._golds[key]
        oracle = get_task(task).oracle
        if oracle is None:
            raise LookupError(f"oracle: task {task!r} has no oracle (prompt {text[:80]!r})")
        return oracle(json.loads(gold))


def _digest(text: str) -> bytes:
    """A prompt's key in the oracle's index: 16 bytes of BLAKE2b (a collision would need 2**64 prompts)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class GarbageModel(_ScriptedModel):
    """Answers a fixed rotation of hostile texts (``GARBAGE_OUTPUTS``), whatever the prompt.

    Args:
        path: a label.
        size: about how long the longest texts are, in characters.
    """

    def __init__(self, path: str = "garbage", size: int = 200_000, **kwargs: Any) -> None:
        super().__init__(path=path, **kwargs)
        outputs = hostile_outputs(size)
        self.texts = [outputs[name] for name in GARBAGE_OUTPUTS]
        self._turn = 0

    def answer(self, prompt: Any) -> str:
        """The next hostile text of the rotation (the prompt is ignored)."""
        text = self.texts[self._turn % len(self.texts)]
        self._turn += 1
        return text
