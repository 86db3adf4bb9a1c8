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
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from opencompass.models.base import BaseModel
from opencompass.models.base_api import APITemplateParser

from ..cache.rows import load_rows, selected_rows
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


PROBES = 64  # spots of 64 bytes compared before a whole candidate prompt is read


def _same_bytes(candidate: pa.Buffer, wanted: bytes) -> bool:
    """Whether a memory-mapped prompt is ``wanted``: :data:`PROBES` spots first, touching as many pages, then all."""
    view, step = memoryview(candidate).cast("B"), max(64, len(wanted) // PROBES)
    if len(view) != len(wanted) or any(
        view[at : at + 64] != wanted[at : at + 64] for at in range(0, len(wanted), step)
    ):
        return False
    return candidate.equals(pa.py_buffer(wanted))  # memcmp (memoryview's == compares item by item: 40x slower)


class OracleModel(ScriptedModel):
    """Answers each prompt with its task's ``oracle`` applied to the prompt's gold.

    The gold is found by the exact text of the prompt's last HUMAN turn among the rows of the
    dataset configs the model is given (``datasets=datasets`` in the model's config): their rows
    are read back from the cache, one dataset at a time until the prompt is found. A prompt found nowhere, or in two
    rows with different golds, is an error naming its first 80 characters: never a wrong answer.

    The index holds each row's prompt length in UTF-8 bytes, read from the Arrow offsets without touching
    a prompt; a prompt is looked up by its length and compared byte for byte with the few rows of that
    length. A 1000k dataset holds gigabytes of prompts: reading (or hashing) them all in every infer task
    was most of an oracle run's infer time (issue 35), and the memory-mapped file keeps them on disk. Rows of
    one length are many at 1000k (one haystack per repeat, a needle at each depth: the same byte length),
    so a candidate is first compared at :data:`PROBES` spots spread over it and read whole only if they all
    agree: a prompt whose needle sits elsewhere differs between the two needle positions.

    Args:
        path: a label.
        datasets: the run's dataset configs (others than needlebench's are ignored).
        kv_bytes_per_token: memory held per prompt token answered so far in this process (0: none), a
            stand-in for a serving engine's KV and prefix cache, which grows with the context it has seen:
            a memory-capped run then fails in its infer stage, as a real long-context model would.
        kwargs: as for :class:`ScriptedModel`.
    """

    def __init__(
        self,
        path: str = "oracle",
        datasets: Sequence[Mapping[str, Any]] = (),
        kv_bytes_per_token: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(path=path, **kwargs)
        self.datasets = [dict(d) for d in datasets if is_needlebench(d)]
        # the datasets indexed so far (memory-mapped): each one's prompt, task and answer, chunk by chunk
        self._chunks: list[dict[str, list[pa.Array]]] = []
        # UTF-8 bytes -> (table, chunk, offset in the chunk): a chunked column's row lookup walks its chunks,
        # thousands at 1000k
        self._by_length: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        self._unread = list(self.datasets)  # indexed one at a time, when a prompt is not found yet
        self.kv_bytes_per_token = kv_bytes_per_token
        self._kv: list[bytearray] = []

    def _matches(self, data: bytes) -> list[tuple[str, str]]:
        """The (task, gold) of every indexed row whose prompt is ``data``."""
        found = []
        for table, chunk, offset in self._by_length.get(len(data), ()):
            columns = self._chunks[table]
            if _same_bytes(columns["prompt"][chunk][offset].as_buffer(), data):
                found.append((columns["task"][chunk][offset].as_py(), columns["answer"][chunk][offset].as_py()))
        return found

    def _find(self, text: str) -> list[tuple[str, str]]:
        """The (task, gold) of the rows holding a prompt, indexing further datasets only while it is not found.

        An infer task answers one shard, usually a few datasets of the run; indexing only until each
        prompt is found keeps a 1000k shard from reading every dataset of the suite.
        """
        data = text.encode("utf-8", "surrogatepass")
        found = self._matches(data)
        while not found and self._unread:
            cfg = self._unread.pop(0)
            table = selected_rows(load_rows(cfg["task"], **config_params(cfg))).data.table
            number = len(self._chunks)
            self._chunks.append({name: table.column(name).chunks for name in ("prompt", "task", "answer")})
            for at, chunk in enumerate(self._chunks[-1]["prompt"]):
                for offset, size in enumerate(pc.binary_length(chunk).to_pylist()):
                    self._by_length[size].append((number, at, offset))
            found = self._matches(data)
        return found

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
            LookupError: none of the model's datasets holds the prompt, or two hold it with different golds.
        """
        text = last_human_message(prompt)
        found = self._find(text)
        if not found:
            raise LookupError(
                f"oracle: none of its {len(self.datasets)} datasets (datasets= in the model config) holds "
                f"the prompt {text[:80]!r}"
            )
        if len(set(found)) > 1:
            raise LookupError(f"oracle: rows with different golds share the prompt {text[:80]!r}")
        task, gold = found[0]
        oracle = get_task(task).oracle
        if oracle is None:
            raise LookupError(f"oracle: task {task!r} has no oracle (prompt {text[:80]!r})")
        return oracle(json.loads(gold))
