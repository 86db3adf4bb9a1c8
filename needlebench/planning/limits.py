"""How a run is cut for each model, with no OpenCompass: room, limits, over-length cells and shards.

The partitioner (OpenCompass's infer and eval stages) and ``needlebench plan``
both call these, so the plan a user reads before the run is the plan the run
executes. A model's room is ``max_seq_len`` - output budget - a reserve (the
chat template's margin; an OpenAI-compatible client's own reserve), in cl100k
tokens, scaled by the model tokenizer's measured ratio where the model config
names a local tokenizer. Each (model, dataset)'s :class:`Limit` carries all of
it, with the tokenizer outputs are counted with (one rule finds it for both:
``model_tokenizer``), so the eval stage and ``needlebench plan`` read the
decision rather than make it again. Shards are contiguous runs of the generation order,
cut to about equal prompt tokens plus output budget.
"""

from __future__ import annotations

import copy
import json
import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cache.rows import load_rows
from ..tasks import config_params, get_task, is_needlebench
from .settings import RunSettings
from .shards import shard_ranges
from .stream import HEAD_CHARS, interleave

__all__ = [
    "model_rows",
    "DEFAULT_MAX_SEQ_LEN",
    "OPENAI_CLIENT_RESERVE",
    "Limit",
    "Limits",
    "is_api_model",
    "limit_ratio",
    "limited_dataset",
    "load_tokenizer",
    "model_tokenizer",
    "tokenizer_readable",
    "model_room",
    "out_len",
    "overlength_cells",
    "reserved_tokens",
    "shard_runs",
    "token_counts",
    "token_shards",
]

DEFAULT_MAX_SEQ_LEN = 32768  # assumed (with a warning) for a model config without max_seq_len


def is_api_model(model: Mapping[str, Any]) -> bool:
    """Whether a model config talks to a server (OpenCompass's OpenAI-style API models).

    Args:
        model: the model config.
    """
    return bool(model.get("openai_api_base"))


def out_len(model: dict, dataset: dict) -> int:
    """The output budget of a (model, dataset): the dataset's inferencer ``max_out_len``, else the model's.

    Args:
        model: the model config.
        dataset: the dataset config.
    """
    inferencer = (dataset.get("infer_cfg") or {}).get("inferencer") or {}
    return int(inferencer.get("max_out_len") or model.get("max_out_len") or 0)


# OpenCompass's OpenAI-compatible models (``opencompass.models.OpenAI`` and its subclasses, ``OpenAISDK``
# among them) give a prompt at most max_seq_len - max_out_len - 100 tokens: past that they trim it themselves
# or refuse the request (``_preprocess_messages``). A prompt we fit with less reserve would arrive cut or not
# at all (measured: a 1,402-token prompt under max_seq_len 1,500 was refused and recorded as a failed request).
OPENAI_CLIENT_RESERVE = 100


def reserved_tokens(model: dict, margin: int) -> int:
    """Tokens a model's prompts must leave free beyond the output budget.

    Args:
        model: the model config; an OpenAI-style API model (``openai_api_base``) keeps OpenCompass's client
            reserve of :data:`OPENAI_CLIENT_RESERVE` tokens at least.
        margin: tokens kept free for the chat template.
    """
    return max(margin, OPENAI_CLIENT_RESERVE) if is_api_model(model) else margin


def model_room(model: dict, dataset: dict, margin: int, logger: Any = None) -> tuple[int, int]:
    """A model's context and the room it leaves for a dataset's prompts.

    Args:
        model: the model config; without ``max_seq_len`` :data:`DEFAULT_MAX_SEQ_LEN` is assumed (with a warning).
        dataset: the dataset config; its inferencer's ``max_out_len`` overrides the model's.
        margin: tokens kept free for the chat template (raised by :func:`reserved_tokens` where the client
            needs more).
        logger: where the missing-``max_seq_len`` warning goes; None stays silent.

    Returns:
        (max_seq_len, max_seq_len - output budget - reserve), both in model tokens.
    """
    max_seq_len = model.get("max_seq_len")
    if not max_seq_len:
        if logger:
            logger.warning(
                f"model {model.get('abbr')}: no max_seq_len in its config; assuming "
                f"{DEFAULT_MAX_SEQ_LEN}. Set max_seq_len so over-length prompts are handled."
            )
        max_seq_len = DEFAULT_MAX_SEQ_LEN
    return int(max_seq_len), int(max_seq_len) - out_len(model, dataset) - reserved_tokens(model, margin)


def model_tokenizer(model: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """Where a model's tokenizer is found, by the one rule the room and the output counts both follow.

    ``tokenizer_path``, else ``path``; with the config's ``tokenizer_kwargs`` (``padding_side`` dropped:
    it changes no count).

    Args:
        model: the model config.

    Returns:
        (the path or hub name, or None; the keyword arguments it loads with).
    """
    path = model.get("tokenizer_path") or model.get("path")
    kwargs = {k: v for k, v in dict(model.get("tokenizer_kwargs") or {}).items() if k != "padding_side"}
    return (str(path) if path else None), kwargs


def tokenizer_readable(path: str | None) -> bool:
    """Whether a tokenizer could be read from ``path``: a local folder, or a hub name (``org/name``) whose
    files the local Hugging Face cache may hold (nothing is downloaded). A served model's name or a
    scripted model's label (no slash) names no tokenizer.

    Args:
        path: the path or hub name (:func:`model_tokenizer`).
    """
    return bool(path) and (Path(str(path)).is_dir() or ("/" in str(path) and not str(path).startswith((".", "/"))))


def load_tokenizer(model: dict) -> tuple[Any, str | None, str | None]:
    """(tokenizer or None, its path or None, load error or None) for a model config (:func:`model_tokenizer`).

    No tokenizer named is not an error (API models, a hub name not in the local cache): the ratio is 1.
    A local folder whose tokenizer fails to load is, and the caller reports it.
    """
    path, kwargs = model_tokenizer(model)
    if not tokenizer_readable(path):
        return None, None, None
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(path), local_files_only=True, **kwargs), str(path), None
    except Exception as exc:  # transformers raises many types for a broken folder; all are reported
        if not Path(str(path)).is_dir():  # a hub name the local cache lacks: none, as for an API model
            return None, None, None
        return None, str(path), f"{type(exc).__name__}: {exc}"


def token_counts(tokenizer: Any, texts: Sequence[str]) -> list[tuple[int, int]]:
    """(model tokens, cl100k tokens) of each text: the one place a model tokenizer is measured against ours.

    Args:
        tokenizer: a transformers tokenizer.
        texts: the texts (prompts, or slices of them).
    """
    from ..context.tokenizer import get_encoding

    enc = get_encoding()
    return [(len(tokenizer(t, add_special_tokens=False)["input_ids"]), len(enc.encode_ordinary(t))) for t in texts]


def limit_ratio(tokenizer: Any, prompts: list[str]) -> float:
    """The ratio a model's room is scaled by: its worst prompt's model tokens per cl100k token, at least 1.

    The worst, not the average: a room computed from the average would let the prompts that tokenise
    worse than average overflow the model. At least 1: never grant more room than cl100k counts.

    Args:
        tokenizer: the model's tokenizer (None: no local tokenizer, ratio 1).
        prompts: a few of the dataset's prompts.
    """
    if tokenizer is None or not prompts:
        return 1.0
    return max(1.0, max(model / max(1, ours) for model, ours in token_counts(tokenizer, prompts)))


class Limits:
    """Each (model, dataset)'s room and over-length policy: the decision the infer stage records.

    Args:
        settings: the run's settings (policy, template margin, whether to measure with the model's
            tokenizer); default: the defaults.
        logger: where a tokenizer that fails to load is warned about (once per path); None stays silent.
    """

    def __init__(self, settings: RunSettings | None = None, logger: Any = None) -> None:
        self.settings = settings or RunSettings()
        self.logger = logger
        self._tokenizers: dict[str, tuple] = {}  # path -> load_tokenizer(...), one load and warning each

    def tokenizer(self, model: dict) -> tuple[Any, str | None, str | None]:
        """A model's local tokenizer, loaded once per path; a folder that fails to load is warned about once.

        Args:
            model: the model config (``tokenizer_path`` or ``path``, ``tokenizer_kwargs``).

        Returns:
            (tokenizer or None, its folder or None, the load error or None).
        """
        path = model_tokenizer(model)[0] or ""
        if path not in self._tokenizers:
            self._tokenizers[path] = load_tokenizer(model)
            tok, where, error = self._tokenizers[path]
            if error and self.logger:
                self.logger.warning(
                    f"model {model.get('abbr')}: tokenizer at {where} failed to load ({error}); "
                    "over-length limits assume 1 model token per cl100k token (the run's plan records it)"
                )
        return self._tokenizers[path]

    def decide(self, model: dict, dataset: dict) -> Limit:
        """Measure a (model, dataset) limit.

        Args:
            model: the model config (``max_seq_len``, ``max_out_len``, a local tokenizer if any).
            dataset: a needlebench dataset config.
        """
        max_seq_len, room = model_room(model, dataset, self.settings.template_margin, self.logger)
        output_tokenizer, output_kwargs = model_tokenizer(model)
        path = error = None
        ratio = 1.0
        if self.settings.measure_with_model_tokenizer:
            tok, path, error = self.tokenizer(model)
            if tok is not None:
                rows = load_rows(dataset["task"], **config_params(dataset))
                prompts = [rows[i]["prompt"] for i in range(0, len(rows), max(1, len(rows) // 3))][:3]
                ratio = limit_ratio(tok, prompts)
        return Limit(
            max_seq_len,
            room,
            self.settings.overlength,
            path,
            ratio,
            error,
            max(1, math.floor(room / ratio)),
            out_len=out_len(model, dataset),
            reserve=reserved_tokens(model, self.settings.template_margin),
            output_tokenizer=output_tokenizer,
            output_tokenizer_kwargs=output_kwargs,
        )


@dataclass(frozen=True)
class Limit:
    """One (model, dataset)'s room and over-length policy, as the infer stage decided it.

    Args:
        max_seq_len: the model's context, in model tokens.
        room: ``max_seq_len`` - output budget - reserve, in model tokens.
        policy: ``shorten`` or ``skip`` a prompt over the room.
        tokenizer: the local tokenizer folder the ratio was measured with (None: none).
        tokenizer_ratio: model tokens per cl100k token the room was divided by (at least 1).
        tokenizer_error: why that tokenizer failed to load (None: it loaded, or there was none).
        max_prompt_tokens: the room in cl100k tokens: what the dataset's prompts are fitted to.
        out_len: the output budget (the dataset's inferencer ``max_out_len``, else the model's; 0: unset).
        reserve: tokens the prompts leave free beyond the budget (chat template; an API client's reserve).
        output_tokenizer: the model's tokenizer (path or hub name, :func:`model_tokenizer`) its outputs are
            counted with; None: cl100k.
        output_tokenizer_kwargs: the keyword arguments it loads with.
    """

    max_seq_len: int
    room: int
    policy: str
    tokenizer: str | None
    tokenizer_ratio: float
    tokenizer_error: str | None
    max_prompt_tokens: int
    out_len: int = 0
    reserve: int = 0
    output_tokenizer: str | None = None
    output_tokenizer_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def evaluator_settings(self) -> dict[str, Any]:
        """What the eval stage writes into the pair's evaluator: how its outputs are counted.

        ``output_tokenizer`` (path or None), ``output_tokenizer_kwargs`` and ``max_out_len`` (None: unknown).
        """
        return {
            "output_tokenizer": self.output_tokenizer,
            "output_tokenizer_kwargs": dict(self.output_tokenizer_kwargs),
            "max_out_len": self.out_len or None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Limit:
        """A limit read back from a run's plan file.

        Args:
            data: the JSON object :func:`dataclasses.asdict` wrote.
        """
        return cls(**{f: data[f] for f in cls.__dataclass_fields__ if f in data or f in _REQUIRED})


# a plan file's limits need these; the later fields (the budget, reserve, output tokenizer) read as unset
# where an older plan lacks them, and such a plan differs from a new one (``planning.run.plan_changes``)
_REQUIRED = ("max_seq_len", "room", "policy", "tokenizer", "tokenizer_ratio", "tokenizer_error", "max_prompt_tokens")


def _cells(task: str, metas: Iterable[Mapping[str, Any]]) -> dict[tuple, int]:
    """Sample counts per cell, as the task declares its cells (``TaskSpec.cell``: coarse coordinate, depth)."""
    spec = get_task(task)
    counts: dict[tuple, int] = defaultdict(int)
    for m in metas:
        counts[spec.cell_of(m)] += 1
    return counts


def planned_cells(dataset: dict) -> dict | None:
    """What a dataset was planned to hold, before any model's limit: every table's ``planned`` count.

    Why: a table that counted only the records it could read would call itself complete when a record
    was lost (a line that is not JSON, a file cut short); with this, a missing record shows as missing.

    Args:
        dataset: the dataset config as written (its ``n`` repeats each row).

    Returns:
        None for a dataset that is not ours; else its task, language, ``cells`` as ``[coarse coordinate,
        depth, count]`` lists (``TaskSpec.cell``), ``samples`` in all, and ``fields``: the record keys
        every row holds with one value (profile, protocol, version, ...), so a record that cannot be read
        still lands in its dataset's tables.
    """
    if not is_needlebench(dataset):
        return None
    task = dataset["task"]
    spec = get_task(task)
    metas = [json.loads(m) for m in load_rows(task, **config_params(dataset))["meta"]]
    repeats = int(dataset.get("n", 1) or 1)
    cells = _cells(task, metas)
    shared = {k: metas[0][k] for k in spec.record_keys if metas and k in metas[0] and k not in spec.cell}
    fields = {k: v for k, v in shared.items() if all(k in m and m[k] == v for m in metas)}
    return {
        "task": task,
        "lang": dataset.get("lang", "en"),
        "cells": [[c[0], c[1], n * repeats] for c, n in sorted(cells.items(), key=str)],
        "samples": len(metas) * repeats,
        "fields": fields,
    }


def overlength_cells(original: dict, limited: dict, ratio: float = 1.0) -> dict | None:
    """Which cells of a dataset a model's limit shortens or skips (a model's ``overlength`` entry in the run's plan,
    ``needlebench_plan.json``).

    Args:
        original: the dataset config as written.
        limited: the same config with the model's ``max_prompt_tokens`` and ``overlength`` (:func:`limited_dataset`).
        ratio: the model tokenizer's tokens per cl100k token the limit was scaled by (recorded only).

    Returns:
        None when every prompt fits (or the dataset is not ours); else the task, language, policy, limit,
        ``shortened`` and ``skipped`` as ``[length, depth, count]`` lists, and their totals.
    """
    if not is_needlebench(original):
        return None
    full = load_rows(original["task"], **config_params(original))
    limit = limited["max_prompt_tokens"]
    if all(n <= limit for n in full["prompt_tokens"]):
        return None
    kept = load_rows(limited["task"], **config_params(limited))
    kept_meta = [json.loads(m) for m in kept["meta"]]
    task = original["task"]
    shortened = _cells(task, (m for m in kept_meta if "shortened_from" in m))
    full_cells, kept_cells = _cells(task, (json.loads(m) for m in full["meta"])), _cells(task, kept_meta)
    skipped = {c: n - kept_cells.get(c, 0) for c, n in full_cells.items() if n > kept_cells.get(c, 0)}
    return {
        "task": original["task"],
        "lang": original.get("lang", "en"),
        "policy": limited["overlength"],
        "max_prompt_tokens": limit,
        "tokenizer_ratio": ratio,
        "shortened": [[c[0], c[1], n] for c, n in sorted(shortened.items(), key=str)],
        "skipped": [[c[0], c[1], n] for c, n in sorted(skipped.items(), key=str)],
        "num_shortened": sum(shortened.values()),
        "num_skipped": sum(skipped.values()),
    }


def limited_dataset(dataset: dict, limit: Limit) -> dict:
    """A copy of a dataset config with a model's limit decision injected: its room, its over-length policy and
    its output budget.

    Why the budget: the plan decided ``limit.out_len`` (room, shard costs, how outputs are counted); written into
    the inferencer, it is the budget the infer task generates with, the one number every stage reads, rather
    than OpenCompass's rule applied again to the config (the same value today, by the same rule,
    :func:`out_len`).

    Args:
        dataset: the dataset config.
        limit: the decision (:meth:`Limits.decide`, or the one a run's plan recorded).
    """
    out = copy.deepcopy(dataset)
    out["max_prompt_tokens"] = int(limit.max_prompt_tokens)
    out["overlength"] = limit.policy
    if limit.out_len:
        out.setdefault("infer_cfg", {}).setdefault("inferencer", {})["max_out_len"] = int(limit.out_len)
    return out


def model_rows(dataset: dict, limit: Limit | None) -> Any:
    """A dataset's rows as a model with this limit is sent them (its room, its over-length policy): the rows the
    infer, eval and report stages and the plan's commands all read; the dataset's own rows without a limit.

    Args:
        dataset: the dataset config.
        limit: the model's limit for it (a run's plan's), or None.
    """
    lim = limited_dataset(dataset, limit) if limit is not None else dataset
    return load_rows(lim["task"], **config_params(lim))


def token_shards(
    model: dict, datasets: list[tuple[int, dict]], num_shards: int, only: Mapping[int, Collection[int]] | None = None
) -> tuple[list[tuple[int, int]], list[int], list[tuple[int, int]]]:
    """Cut a model's samples into contiguous runs of about equal cost (prompt tokens plus output budget).

    The stream interleaves datasets that share a haystack (S-RT and M-RS of a repeat, ``stream.py``),
    so a dataset may come back in several pieces, each a contiguous range of its rows.

    Args:
        model: the model config (its ``max_out_len`` is the output budget where a dataset sets none).
        datasets: (index, needlebench dataset config with the model's limit) pairs, in run order.
        num_shards: runs wanted; fewer come back when there are fewer samples.
        only: only these rows of each dataset index (an adaptive run's round), in the order the whole stream
            sends them; None: every row.

    Returns:
        (the stream of (dataset index, row index), each sample's cost, the (start, end) ranges over the stream).
    """
    cost: dict[tuple[int, int], int] = {}
    keys, heads = [], []
    for di, d in datasets:
        params = config_params(d)
        rows = load_rows(d["task"], **params)
        budget = out_len(model, d)
        for ri, n in enumerate(rows["prompt_tokens"]):
            cost[di, ri] = n + budget
        group = get_task(d["task"]).prefix_group
        lang = str(params.get("lang", ""))
        # the task's prefix groups are read off each sample's metadata (its haystack's coordinates)
        keys.append([group(lang, json.loads(m)) for m in rows["meta"]] if group else [(None, 0.0)] * len(rows))
        heads.append(rows[0]["prompt"][:HEAD_CHARS] if len(rows) else "")
    # datasets sharing a haystack interleaved (planning/stream.py); indices back to the caller's
    index = [di for di, _ in datasets]
    stream = [(index[k], ri) for k, ri in interleave(keys, heads, int(model.get("batch_size") or 1))]
    if only is not None:
        stream = [(di, ri) for di, ri in stream if ri in only.get(di, ())]
    costs = [cost[s] for s in stream]
    return stream, costs, (shard_ranges(costs, num_shards) if stream else [])


def shard_runs(stream: Sequence[tuple[int, int]], start: int, end: int) -> list[tuple[int, list[int]]]:
    """The runs of one dataset inside a shard: ``(dataset index, its rows in the order sent)``; a full grid's are
    contiguous ranges, an adaptive round's rows its ladder picked.

    Args:
        stream: the model's samples as (dataset index, row index), in run order (:func:`token_shards`).
        start: the shard's first position in the stream.
        end: the position after its last.
    """
    runs: list[tuple[int, list[int]]] = []
    for di, row in stream[start:end]:
        if runs and runs[-1][0] == di:
            runs[-1][1].append(row)
        else:
            runs.append((di, [row]))
    return runs
