"""One run's plan: every decision the partitioner makes, made once, as one frozen object.

:func:`plan_run` decides, per model: each dataset's limit (:class:`~needlebench.planning.limits.Limit`),
the cells that limit shortens or skips, and the infer tasks (shards) as contiguous pieces of the model's
request stream, each piece a row range of one dataset. The partitioner's infer stage writes it to the run's
folder (:data:`PLAN_FILE`, with the memory cgroup's OOM-kill count at that moment) and renders OpenCompass's
task configs from it; its eval stage reads the limits back; ``needlebench plan`` prints it; the summarizer's
stage check reads it and the run's files, and writes nothing. The plan is the whole run: which pieces a
resume still has to run is a question of which output files exist, asked by whoever renders tasks.
"""

from __future__ import annotations

import copy
import json
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

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

__all__ = [
    "PLAN_FILE",
    "MemoryBaseline",
    "ModelRun",
    "Part",
    "RunPlan",
    "Shard",
    "part_config",
    "plan_changes",
    "plan_run",
    "read_plan",
    "write_plan",
]

log = logging.getLogger(__name__)

PLAN_FILE = "needlebench_plan.json"  # written by the infer stage, read by the eval stage and the stage check


@dataclass(frozen=True)
class Part:
    """A contiguous row range of one dataset that one infer task runs.

    Args:
        dataset: the dataset config's abbr.
        number: its part number where the dataset comes in several pieces (``abbr_<number>``, in row
            order), None where it is one piece.
        start: the first row.
        end: the row after the last.
    """

    dataset: str
    number: int | None
    start: int
    end: int

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
    """

    abbr: str
    limits: Mapping[str, Limit]
    overlength: Mapping[str, Mapping[str, Any]]
    shards: tuple[Shard, ...]
    others: tuple[str, ...] = ()
    planned: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, compare=False)


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
        """The plan as one JSON object (what :func:`write_plan` stores)."""
        return json.dumps(asdict(self), indent=1, sort_keys=True, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> RunPlan:
        """A plan read back from :meth:`to_json`'s text.

        Args:
            text: the JSON text.
        """
        data = json.loads(text)
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
) -> ModelRun:
    """One model's limits, over-length cells and shards; ``planned`` is every dataset's planned cells (the same
    for every model: computed once by :func:`plan_run`)."""
    abbr = model.get("abbr", "model")
    decided: dict[str, Limit] = {}
    overlength: dict[str, Mapping[str, Any]] = {}
    limited: list[tuple[int, dict]] = []
    others = []
    for di, d in enumerate(datasets):
        if not is_needlebench(d):
            others.append(str(d.get("abbr", "")))
            continue
        limit = decided[d["abbr"]] = limits.decide(model, d)
        lim = limited_dataset(d, limit)
        cells = overlength_cells(d, lim, limit.tokenizer_ratio)
        if cells is not None:
            overlength[d["abbr"]] = cells
        limited.append((di, lim))
    stream, costs, ranges = token_shards(model, limited, settings.num_shards)  # stream: (dataset index, row)
    runs = [(shard, *run) for shard, (a, b) in enumerate(ranges) for run in shard_runs(stream, a, b)]
    pieces: dict[int, int] = defaultdict(int)
    for _, di, _, _ in runs:
        pieces[di] += 1
    numbered: dict[int, int] = defaultdict(int)  # dataset index -> the next part number
    parts: dict[int, list[Part]] = defaultdict(list)
    for shard, di, start, end in runs:
        number = None if pieces[di] == 1 else numbered[di]
        numbered[di] += 1
        parts[shard].append(Part(datasets[di]["abbr"], number, start, end))
    budget = {di: out_len(model, d) for di, d in limited}
    shards = []
    for index, (a, b) in enumerate(ranges):
        outputs = sum(budget[di] for di, _ in stream[a:b])
        shards.append(Shard(index, tuple(parts[index]), b - a, sum(costs[a:b]) - outputs, outputs))
    mine = {a: planned[a] for a in decided}
    return ModelRun(abbr, decided, overlength, tuple(shards), tuple(others), mine)


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
    return RunPlan(settings, tuple(_model_run(limits, settings, m, datasets, planned) for m in models))


def plan_changes(stored: RunPlan, new: RunPlan) -> list[str]:
    """What differs between the plan a run stored and the plan its config gives now, one line per difference.

    Empty when they are the same run (the memory baseline aside). Each line names the setting, the model
    and the datasets it touches, with the stored value and the new one; a limit field that differs for many
    datasets of one model is one line.

    Args:
        stored: the plan the run's infer stage stored (``needlebench_plan.json``).
        new: the plan the config gives now.
    """
    out = [
        f"partitioner {name}: {getattr(stored.settings, name)!r} -> {getattr(new.settings, name)!r}"
        for name in RunSettings.planned()
        if getattr(stored.settings, name) != getattr(new.settings, name)
    ]
    settings_changed = bool(out)
    old_models, new_models = [m.abbr for m in stored.models], [m.abbr for m in new.models]
    if old_models != new_models:
        out.append(f"models: {old_models} -> {new_models}")
    for model in new.models:
        old = stored.model(model.abbr)
        if old is None:
            continue
        if set(old.limits) != set(model.limits) or old.others != model.others:
            gone = sorted(set(old.limits) - set(model.limits)) + sorted(set(old.others) - set(model.others))
            added = sorted(set(model.limits) - set(old.limits)) + sorted(set(model.others) - set(old.others))
            out.append(f"{model.abbr}: datasets removed {gone or 'none'}, added {added or 'none'}")
        fields: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        for abbr in sorted(set(old.limits) & set(model.limits)):
            a, b = asdict(old.limits[abbr]), asdict(model.limits[abbr])
            for name in a:
                if a[name] != b[name]:
                    fields[(name, repr(a[name]), repr(b[name]))].append(abbr)
        for (name, before, after), abbrs in sorted(fields.items()):
            where = abbrs[0] if len(abbrs) == 1 else f"{len(abbrs)} datasets ({abbrs[0]}, ...)"
            out.append(f"{model.abbr} / {where}: {name} {before} -> {after}")
        if not (fields or settings_changed) and set(old.limits) == set(model.limits) and old.shards != model.shards:
            out.append(f"{model.abbr}: the shards are cut otherwise ({len(old.shards)} -> {len(model.shards)})")
    return out


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


def write_plan(plan: RunPlan, work_dir: Path | str) -> Path:
    """Store a run's plan in its folder, whole or not at all.

    Args:
        plan: the plan.
        work_dir: the run's folder.
    """
    from ..files import atomic_write

    path = Path(work_dir) / PLAN_FILE
    with atomic_write(path) as tmp:
        tmp.write_text(plan.to_json() + "\n", encoding="utf-8")
    return path


def read_plan(work_dir: Path | str) -> RunPlan | None:
    """The plan a run's infer stage stored, or None where it stored none (or it cannot be read: warned).

    Args:
        work_dir: the run's folder.
    """
    path = Path(work_dir) / PLAN_FILE
    try:
        return RunPlan.from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("%s is unreadable (%s: %s); the limits are decided again", path, type(exc).__name__, exc)
        return None
