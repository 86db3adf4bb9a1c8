"""Scripted models for checking an install: the base class, and an oracle that answers every prompt with its gold.

A run with the oracle must show 100 in every table; any other number means the pipeline
(generation, sharding, prompt templates, grading, merging, summarising) lost or mixed up samples.
Scripted models are API-style: no weights, no compute. The garbage model that answers hostile
text lives with the tests (``tests/garbage_model.py``), beside the hostile-output generator.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from opencompass.models.base import BaseModel
from opencompass.models.base_api import APITemplateParser

from ..cache.rows import load_rows
from ..tasks import config_params, get_task, is_needlebench

__all__ = ["ScriptedModel", "OracleModel", "API_META_TEMPLATE", "last_human_message"]

# OpenCompass's usual API meta template: the model receives the dialogue as role-tagged messages
# (a PromptList), so the oracle can read the last user turn exactly, with no template text around it.
API_META_TEMPLATE = dict(
    round=[dict(role="HUMAN", api_role="HUMAN"), dict(role="BOT", api_role="BOT", generate=True)],
    reserved_roles=[dict(role="SYSTEM", api_role="SYSTEM")],
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


class ScriptedModel(BaseModel):
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


class OracleModel(ScriptedModel):
    """Answers each prompt with its task's ``oracle`` applied to the prompt's gold.

    The gold is found by the exact text of the prompt's last HUMAN turn among the rows of the
    dataset configs the model is given (``datasets=datasets`` in the model's config): their rows
    are read back from the cache, indexed on the first prompt. A prompt found nowhere, or in two
    rows with different golds, is an error naming its first 80 characters: never a wrong answer.

    Args:
        path: a label.
        datasets: the run's dataset configs (others than needlebench's are ignored).
        kwargs: as for :class:`ScriptedModel`.
    """

    def __init__(self, path: str = "oracle", datasets: Sequence[Mapping[str, Any]] = (), **kwargs: Any) -> None:
        super().__init__(path=path, **kwargs)
        self.datasets = [dict(d) for d in datasets if is_needlebench(d)]
        self._golds: dict[str, tuple[str, str]] | None = None
        self._ambiguous: set[str] = set()

    def _index(self) -> dict[str, tuple[str, str]]:
        if self._golds is None:
            golds: dict[str, tuple[str, str]] = {}
            for cfg in self.datasets:
                rows = load_rows(cfg["task"], **config_params(cfg))
                for prompt, task, gold in zip(rows["prompt"], rows["task"], rows["answer"], strict=True):
                    if golds.setdefault(prompt, (task, gold)) != (task, gold):
                        self._ambiguous.add(prompt)
            self._golds = golds
        return self._golds

    def answer(self, prompt: Any) -> str:
        """The perfect answer to one prompt.

        Args:
            prompt: as OpenCompass passes it (a string or a PromptList).

        Raises:
            LookupError: none of the model's datasets holds the prompt, or two hold it with different golds.
        """
        text = last_human_message(prompt)
        golds = self._index()
        if text not in golds:
            raise LookupError(
                f"oracle: none of its {len(self.datasets)} datasets (datasets= in the model config) holds "
                f"the prompt {text[:80]!r}"
            )
        if text in self._ambiguous:
            raise LookupError(f"oracle: rows with different golds share the prompt {text[:80]!r}")
        task, gold = golds[text]
        oracle = get_task(task).oracle
        if oracle is None:
            raise LookupError(f"oracle: task {task!r} has no oracle (prompt {text[:80]!r})")
        return oracle(json.loads(gold))
