"""One run's plan: every decision the partitioner makes, made once, as one frozen object.

:func:`plan_run` decides, per model: each dataset's limit (:class:`~needlebench.planning.limits.Limit`),
the cells that limit shortens or skips, and the infer tasks (shards) as contiguous pieces of the model's
request stream, each piece a row range of one dataset. The run folder's wing stores it (``runfolder/plan_file.py``,
with the memory cgroup's OOM-kill count at that moment, the datasets' fingerprints and the run's history) and
a resume renders OpenCompass's task configs from the stored plan; the eval stage reads the limits back;
``needlebench plan`` prints it. The plan is the whole run: which pieces a resume still has to run is a
question of which output files are whole (``runfolder/pieces.py``).
"""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..methods.kv_press import PressSpec
from ..placement import task_gpus
from ..tasks import is_needlebench
from .limits import (
    Limit,
    Limits,
    limited_dataset,
    out_len,
    overlength_cells,
    planned_cells,
    shard_runs,
    token_shards,
)
from .settings import RunSettings
from .variants import Variant, plan_variants
from .window import beyond_cells, read_window

__all__ = [
    "MemoryBaseline",
    "ModelRun",
    "Part",
    "RunPlan",
    "Shard",
    "part_config",
    "plan_run",
]


@dataclass(frozen=True)
class Part:
    """A contiguous row range of one dataset that one infer task runs.

    Args:
        dataset: the dataset config's abbr.
        number: its part number where the dataset comes in several pieces (``abbr_<number>``, in row
            order), None where it is one piece.
        start: the first row.
        end: the row after the last.
        prompt_tokens: its rows' cl100k prompt tokens (what ``needlebench status`` counts done per row;
            0 in a plan stored before it existed).
    """

    dataset: str
    number: int | None
    start: int
    end: int
    prompt_tokens: int = 0

    @property
    def abbr(self) -> str:
        """The abbr of the piece's prediction file: ``abbr_<number>``, or the dataset's own."""
        return self.dataset if self.number is None else f"{self.dataset}_{self.number}"


@dataclass(frozen=True)
class Shard:
    """One infer task: its pieces in the order it sends them.

    Args:
        index: the shard's number.
        parts: its pieces, in stream order.
        samples: prompts in it.
        prompt_tokens: their cl100k prompt tokens.
        output_tokens: their output budget.
    """

    index: int
    parts: tuple[Part, ...]
    samples: int
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class ModelRun:
    """What one model's run is.

    Args:
        abbr: the model's abbr.
        limits: per needlebench dataset abbr, its limit.
        overlength: per dataset abbr whose limit shortens or skips prompts, which cells
            (:func:`~needlebench.planning.limits.overlength_cells`).
        shards: the infer tasks of its needlebench datasets.
        others: abbrs of its datasets that are not needlebench's (run by OpenCompass as they are).
        planned: per needlebench dataset abbr, the samples it was planned to hold, per cell
            (:func:`~needlebench.planning.limits.planned_cells`): every table's ``planned`` count comes from
            here, never from the records that could be read. Empty in a plan stored before it existed.
        window: the model's context window read offline (``planning.window.Window.to_dict``); None where its
            ``config.json`` cannot be read (API and scripted models).
        beyond_window: per dataset abbr whose prompts go past that window, which cells
            (:func:`~needlebench.planning.window.beyond_cells`): the run stops on them, or marks them.
        method: the KV-cache press the model runs under (``methods.kv_press.PressSpec.to_dict``); None for
            a model without one.
        model_variant: what the model varies and which model it varies (``planning.variants.Variant.to_dict``); None
            for a model that is no variant.
        devices: the GPUs each of its infer tasks holds (``run_cfg.num_gpus``): the ledger's device-seconds.
    """

    abbr: str
    limits: Mapping[str, Limit]
    overlength: Mapping[str, Mapping[str, Any]]
    shards: tuple[Shard, ...]
    others: tuple[str, ...] = ()
    planned: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, compare=False)
    window: Mapping[str, Any] | None = None
    beyond_window: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    method: Mapping[str, Any] | None = None
    model_variant: Mapping[str, Any] | None = None
    devices: int = field(default=0, compare=False)


@dataclass(frozen=True)
class MemoryBaseline:
    """The memory cgroup the run was planned in, when it was planned.

    Why: the kernel's OOM killer leaves no message; the cgroup's kill counter does, but a reused cgroup
    counts kills of earlier runs too. Only kills after this count are blamed on this run.

    Args:
        path: the cgroup's folder.
        limit: its limit in bytes (None: none).
        oom_kills: the kills it had counted.
    """

    path: str
    limit: int | None
    oom_kills: int


@dataclass(frozen=True)
class RunPlan:
    """Every decision of one run, per model (see the module).

    Args:
        settings: the infer partitioner's settings.
        models: per model, in config order.
        memory: the memory cgroup at planning time; None where there is none (or the plan was not made
            by a run, e.g. ``needlebench plan``).
    """

    settings: RunSettings
    models: tuple[ModelRun, ...]
    memory: MemoryBaseline | None = field(default=None, compare=False)

    def model(self, abbr: str) -> ModelRun | None:
        """The plan of the model with this abbr, if the run has one.

        Args:
            abbr: the model's abbr.
        """
        return next((m for m in self.models if m.abbr == abbr), None)

    def to_json(self) -> str:
        """The plan as one JSON object (what ``runfolder.plan_file`` stores, beside the run's own keys)."""
        return json.dumps(self.to_dict(), indent=1, sort_keys=True, ensure_ascii=False)

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON data."""
        return asdict(self)

    @classmethod
    def from_json(cls, text: str) -> RunPlan:
        """A plan read back from :meth:`to_json`'s text.

        Args:
            text: the JSON text.
        """
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunPlan:
        """A plan from :meth:`to_dict`'s data (keys it does not hold are ignored).

        Args:
            data: the JSON data.
        """
        models = tuple(
            ModelRun(
                abbr=m["abbr"],
                limits={k: Limit.from_dict(v) for k, v in m["limits"].items()},
                overlength=m["overlength"],
                shards=tuple(
                    Shard(
                        s["index"],
                        tuple(Part(**p) for p in s["parts"]),
                        s["samples"],
                        s["prompt_tokens"],
                        s["output_tokens"],
                    )
                    for s in m["shards"]
                ),
                others=tuple(m["others"]),
                planned=m.get("planned", {}),
                window=m.get("window"),
                beyond_window=m.get("beyond_window", {}),
                method=m.get("method"),
                model_variant=m.get("model_variant"),
                devices=int(m.get("devices", 0) or 0),
            )
            for m in data["models"]
        )
        memory = MemoryBaseline(**data["memory"]) if data.get("memory") else None
        return cls(RunSettings.of(data["settings"]), models, memory)


def _model_run(
    limits: Limits,
    settings: RunSettings,
    model: dict,
    datasets: Sequence[dict],
    planned: Mapping[str, Mapping[str, Any]],
    variant: Variant | None = None,
) -> ModelRun:
    """One model's limits, over-length cells and shards; ``planned`` is every dataset's planned cells (the same
    for every model: computed once by :func:`plan_run`)."""
    abbr = model.get("abbr", "model")
    decided: dict[str, Limit] = {}
    overlength: dict[str, Mapping[str, Any]] = {}
    limited: list[tuple[int, dict]] = []
    others = []
    window = read_window(model)
    beyond: dict[str, Mapping[str, Any]] = {}
    for di, d in enumerate(datasets):
        if not is_needlebench(d):
            others.append(str(d.get("abbr", "")))
            continue
        limit = decided[d["abbr"]] = limits.decide(model, d)
        lim = limited_dataset(d, limit)
        cells = overlength_cells(d, lim, limit.tokenizer_ratio)
        if cells is not None:
            overlength[d["abbr"]] = cells
        past = beyond_cells(window, lim, limit.tokenizer_ratio, limit.out_len) if window else None
        if past is not None:
            beyond[d["abbr"]] = past
        limited.append((di, lim))
    stream, costs, ranges = token_shards(model, limited, settings.num_shards)  # stream: (dataset index, row)
    runs = [(shard, *run) for shard, (a, b) in enumerate(ranges) for run in shard_runs(stream, a, b)]
    pieces: dict[int, int] = defaultdict(int)
    for _, di, _, _ in runs:
        pieces[di] += 1
    budget = {di: out_len(model, d) for di, d in limited}
    prompt = {item: cost - budget[item[0]] for item, cost in zip(stream, costs)}  # (dataset, row) -> tokens
    numbered: dict[int, int] = defaultdict(int)  # dataset index -> the next part number
    parts: dict[int, list[Part]] = defaultdict(list)
    for shard, di, start, end in runs:
        number = None if pieces[di] == 1 else numbered[di]
        numbered[di] += 1
        tokens = sum(prompt.get((di, row), 0) for row in range(start, end))
        parts[shard].append(Part(datasets[di]["abbr"], number, start, end, tokens))
    shards = []
    for index, (a, b) in enumerate(ranges):
        outputs = sum(budget[di] for di, _ in stream[a:b])
        shards.append(Shard(index, tuple(parts[index]), b - a, sum(costs[a:b]) - outputs, outputs))
    mine = {a: planned[a] for a in decided}
    press = model.get("kv_press")
    method = PressSpec.of(press, abbr).to_dict() if press is not None else None
    return ModelRun(
        abbr,
        decided,
        overlength,
        tuple(shards),
        tuple(others),
        mine,
        window.to_dict() if window else None,
        beyond,
        method,
        variant.to_dict() if variant else None,
        task_gpus(model),
    )


def plan_run(
    models: Sequence[dict],
    datasets: Sequence[dict],
    settings: RunSettings,
    logger: Any = None,
    limits: Limits | None = None,
) -> RunPlan:
    """Decide a run: per model, each dataset's limit, its over-length cells and the shards.

    Pure in its inputs: the configs, the settings, the datasets' rows (built or read from the cache) and the
    models' local tokenizers; it reads no run folder and writes nothing.

    Args:
        models: the model configs, in config order.
        datasets: the dataset configs every model runs, in config order (not only needlebench's).
        settings: the infer partitioner's settings.
        logger: where a tokenizer that fails to load or a missing ``max_seq_len`` is warned about.
        limits: the decisions' maker, where the caller holds one (its tokenizers are loaded once);
            None makes one from ``settings``.
    """
    limits = limits or Limits(settings, logger)
    planned = {d["abbr"]: planned_cells(d) or {} for d in datasets if is_needlebench(d)}
    variants, notes = plan_variants(models)
    for note in notes:
        if logger is not None:
            logger.warning(note)
    return RunPlan(
        settings,
        tuple(_model_run(limits, settings, m, datasets, planned, variants.get(str(m.get("abbr")))) for m in models),
    )


def part_config(dataset: dict, limit: Limit, part: Part) -> dict:
    """The dataset config an infer task runs for one piece: the model's limit in, the piece's rows selected.

    Args:
        dataset: the needlebench dataset config as the run's config writes it.
        limit: the model's limit for it.
        part: the piece.
    """
    cfg = limited_dataset(dataset, limit)
    if part.number is not None:
        cfg["abbr"] = part.abbr
        cfg["reader_cfg"] = copy.deepcopy(cfg.get("reader_cfg") or {})
        cfg["reader_cfg"]["test_range"] = f"[{part.start}:{part.end}]"
    return cfg
