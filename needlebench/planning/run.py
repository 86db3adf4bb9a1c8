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
import dataclasses
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..adaptive.ladder import LadderSettings
from ..aggregate.effective_length import EffectiveRule
from ..methods.kv_press import PressSpec
from ..placement import task_gpus
from ..tasks import is_needlebench
from .adaptive import DatasetLadder, LadderGrid, LadderRound, decide, ladder_grid
from .limits import (
    Limit,
    Limits,
    limited_dataset,
    model_rows,
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
    "add_round",
    "ModelRun",
    "Part",
    "RunPlan",
    "Shard",
    "adaptive_rows",
    "ladder_config",
    "part_config",
    "plan_run",
    "row_selection",
]


@dataclass(frozen=True)
class Part:
    """The rows of one dataset that one infer task runs: a contiguous range, or an adaptive run's rows.

    Args:
        dataset: the dataset config's abbr.
        number: its part number where the dataset comes in several pieces (``abbr_<number>``, in the order
            its prediction files are read), None where it is one piece.
        start: the first row.
        end: the row after the last.
        prompt_tokens: its rows' cl100k prompt tokens (what ``needlebench status`` counts done per row;
            0 in a plan stored before it existed).
        rows: its rows where they are not ``start`` to ``end`` (an adaptive round's, in the order sent);
            empty: the range.
    """

    dataset: str
    number: int | None
    start: int
    end: int
    prompt_tokens: int = 0
    rows: tuple[int, ...] = ()

    @property
    def abbr(self) -> str:
        """The abbr of the piece's prediction file: ``abbr_<number>``, or the dataset's own."""
        return self.dataset if self.number is None else f"{self.dataset}_{self.number}"

    @property
    def size(self) -> int:
        """Its rows' count."""
        return len(self.rows) if self.rows else self.end - self.start

    def row(self, index: int) -> int:
        """The dataset row of its ``index``-th prediction (a prediction file counts its own rows from 0).

        Args:
            index: the prediction's key in the part's file.
        """
        return self.rows[index] if self.rows else self.start + index

    def row_list(self) -> list[int]:
        """Its rows, in its prediction file's order."""
        return list(self.rows) if self.rows else list(range(self.start, self.end))

    @property
    def test_range(self) -> str:
        """What OpenCompass's reader selects it by (:func:`row_selection`)."""
        return row_selection(self.rows) if self.rows else f"[{self.start}:{self.end}]"


def row_selection(rows: Sequence[int]) -> str:
    """A ``test_range`` that OpenCompass's reader turns into these rows, in this order.

    Why this form: the reader selects ``eval(f"index_list{test_range}")``; each run of consecutive rows is one of
    the slices it documents (``[a:b]``), joined by ``+index_list``, so the reader serves an adaptive run's
    rows as it serves a range, unchanged (``tests/test_adaptive_run.py`` checks it with OpenCompass's reader).
    No rows: ``[0:0]``.

    Args:
        rows: the rows, in the order their predictions are read.
    """
    spans: list[list[int]] = []
    for row in rows:
        if spans and row == spans[-1][1]:
            spans[-1][1] += 1
        else:
            spans.append([row, row + 1])
    return "+index_list".join(f"[{a}:{b}]" for a, b in spans) or "[0:0]"


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
        ladders: an adaptive run's grid per dataset the ladder climbs (``planning.adaptive.LadderGrid``); empty
            for a full-grid run.
        rounds: an adaptive run's rounds so far (``planning.adaptive.LadderRound``): its shards are theirs, each
            round's parts numbered after the rounds' before.
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
    ladders: Mapping[str, LadderGrid] = field(default_factory=dict)
    rounds: tuple[LadderRound, ...] = ()

    def asked(self, abbr: str) -> list[str]:
        """The sample ids an adaptive run's rounds asked of one dataset, round by round (empty for a full grid).

        Args:
            abbr: the dataset's abbr.
        """
        return [sid for step in self.rounds for sid in step.asks.get(abbr, ())]

    @property
    def rule(self) -> Mapping[str, Any] | None:
        """The effective-length rule an adaptive run's first round stored (``EffectiveRule``'s fields): every
        later round, the eval stage and the report's replay decide by it; None for a full grid."""
        return self.rounds[0].rule if self.rounds else None

    def first_round(self) -> ModelRun:
        """The plan as its first round left it (an adaptive run's; another is itself): what the config alone
        gives, which a resume compares with the plan its config gives now."""
        if not self.rounds:
            return self
        first = set(self.rounds[0].shards)
        return dataclasses.replace(
            self, shards=tuple(s for s in self.shards if s.index in first), rounds=self.rounds[:1]
        )


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
                        tuple(Part(**{**p, "rows": tuple(p.get("rows") or ())}) for p in s["parts"]),
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
                ladders={k: LadderGrid.from_dict(v) for k, v in (m.get("ladders") or {}).items()},
                rounds=tuple(LadderRound.from_dict(r) for r in m.get("rounds") or ()),
            )
            for m in data["models"]
        )
        memory = MemoryBaseline(**data["memory"]) if data.get("memory") else None
        return cls(RunSettings.of(data["settings"]), models, memory)


def _shards(
    model: dict,
    datasets: Sequence[dict],
    limited: list[tuple[int, dict]],
    num_shards: int,
    rows: Mapping[int, set[int]] | None = None,
    numbered: Mapping[str, int] | None = None,
    first: int = 0,
) -> tuple[Shard, ...]:
    """Shards over the model's rows (``rows``: only these, per dataset index), pieces as contiguous row ranges.

    A dataset in one piece is unnumbered (``abbr.json``); ``numbered`` (an adaptive run's) numbers every piece,
    each dataset's from the count its earlier rounds hold, so no earlier file changes its name.
    """
    stream, costs, ranges = token_shards(model, limited, num_shards, rows)  # stream: (dataset index, row)
    runs = [(shard, *run) for shard, (a, b) in enumerate(ranges) for run in shard_runs(stream, a, b)]
    pieces: dict[int, int] = defaultdict(int)
    for _, di, _ in runs:
        pieces[di] += 1
    budget = {di: out_len(model, d) for di, d in limited}
    prompt = {item: cost - budget[item[0]] for item, cost in zip(stream, costs)}  # (dataset, row) -> tokens
    numbers: dict[int, int] = defaultdict(int)  # dataset index -> the next part number
    if numbered is not None:
        numbers.update({di: numbered.get(datasets[di]["abbr"], 0) for di, _ in limited})
    parts: dict[int, list[Part]] = defaultdict(list)
    for shard, di, got in runs:
        number = None if numbered is None and pieces[di] == 1 else numbers[di]
        numbers[di] += 1
        tokens = sum(prompt.get((di, row), 0) for row in got)
        whole = got == list(range(got[0], got[-1] + 1))
        parts[shard].append(
            Part(datasets[di]["abbr"], number, got[0], got[-1] + 1, tokens, () if whole else tuple(got))
        )
    shards = []
    for index, (a, b) in enumerate(ranges):
        outputs = sum(budget[di] for di, _ in stream[a:b])
        shards.append(Shard(first + index, tuple(parts[index]), b - a, sum(costs[a:b]) - outputs, outputs))
    return tuple(shards)


def _first_round(
    datasets: Sequence[dict], limited: list[tuple[int, dict]], decided: Mapping[str, Limit], ladder: LadderSettings
) -> tuple[dict[str, LadderGrid], dict[int, set[int]], LadderRound]:
    """An adaptive run's first round for one model: each length-suite dataset's grid, the rows the round asks per
    dataset index (every row of a dataset without length suites), and the round."""
    ladders, rows, asks, reasons = {}, {}, {}, {}
    for di, _ in limited:
        abbr = datasets[di]["abbr"]
        grid = ladder_grid(datasets[di], decided[abbr])
        if grid is None:  # a task without length suites: whole, in the first round
            rows[di] = set(range(len(model_rows(datasets[di], decided[abbr]))))
            continue
        ladders[abbr] = grid
        found, asks[abbr] = decide(grid, {}, ladder)
        reasons[abbr] = found.reason
        index = grid.rows()
        rows[di] = {index[s] for s in asks[abbr]}
    return ladders, rows, LadderRound(0, asks, reasons)


def _model_run(
    limits: Limits,
    settings: RunSettings,
    model: dict,
    datasets: Sequence[dict],
    planned: Mapping[str, Mapping[str, Any]],
    variant: Variant | None = None,
    rule: EffectiveRule | None = None,
) -> ModelRun:
    """One model's limits, over-length cells and shards; ``planned`` is every dataset's planned cells (the same
    for every model: computed once by :func:`plan_run`). An adaptive run's shards are its first round's."""
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
    ladders: dict[str, LadderGrid] = {}
    rounds: tuple[LadderRound, ...] = ()
    if settings.adaptive is None:
        shards = _shards(model, datasets, limited, settings.num_shards)
    else:
        rule = rule or EffectiveRule()
        ladders, rows, first = _first_round(datasets, limited, decided, LadderSettings.of(settings.adaptive, rule))
        shards = _shards(model, datasets, limited, settings.num_shards, rows, {})
        rounds = (dataclasses.replace(first, shards=tuple(s.index for s in shards), rule=dataclasses.asdict(rule)),)
    mine = {a: planned[a] for a in decided}
    press = model.get("kv_press")
    method = PressSpec.of(press, abbr).to_dict() if press is not None else None
    return ModelRun(
        abbr,
        decided,
        overlength,
        shards,
        tuple(others),
        mine,
        window.to_dict() if window else None,
        beyond,
        method,
        variant.to_dict() if variant else None,
        task_gpus(model),
        ladders,
        rounds,
    )


def add_round(
    run: ModelRun, model: dict, datasets: Sequence[dict], settings: RunSettings, ladder_round: LadderRound
) -> ModelRun:
    """A model's plan with one more round of an adaptive run: its asks as shards after the plan's, each dataset's
    parts numbered after its earlier ones.

    Args:
        run: the model's plan so far.
        model: the model config.
        datasets: the dataset configs it runs, in config order.
        settings: the run's settings.
        ladder_round: the round (its asks are sample ids of the plan's ladders).
    """
    limited, rows, placed = [], {}, {}
    for di, d in enumerate(datasets):
        asks = ladder_round.asks.get(d.get("abbr", ""))
        if not asks or d["abbr"] not in run.ladders:
            continue
        index = run.ladders[d["abbr"]].rows()
        limited.append((di, limited_dataset(d, run.limits[d["abbr"]])))
        rows[di] = {index[s] for s in asks}
        placed[d["abbr"]] = asks
    numbered: dict[str, int] = defaultdict(int)
    for shard in run.shards:
        for part in shard.parts:
            numbered[part.dataset] += 1
    shards = _shards(model, datasets, limited, settings.num_shards, rows, numbered, len(run.shards)) if rows else ()
    reasons = {k: v for k, v in ladder_round.reasons.items() if k in placed}  # only what has parts is asked
    step = dataclasses.replace(ladder_round, asks=placed, reasons=reasons, shards=tuple(s.index for s in shards))
    return dataclasses.replace(run, shards=(*run.shards, *shards), rounds=(*run.rounds, step))


def ladder_config(run: ModelRun, abbr: str, adaptive: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """One dataset's ladder as its evaluator is given it (``planning.adaptive.DatasetLadder``, as JSON data):
    what it writes for the prompts no round asked and how it decides the effective length; None for a dataset
    without a ladder.

    Args:
        run: the model's plan.
        abbr: the dataset's abbr.
        adaptive: the run's ``RunSettings.adaptive``.
    """
    grid = run.ladders.get(abbr)
    if grid is None:
        return None
    fields = (run.planned.get(abbr) or {}).get("fields") or {}
    return asdict(DatasetLadder(grid, tuple(run.asked(abbr)), dict(adaptive or {}), run.rule, dict(fields)))


def adaptive_rows(run: ModelRun, abbr: str) -> list[int] | None:
    """The rows of one dataset an adaptive run's parts hold, in their files' order (part number, then row); None
    where they are every row in order (a full-grid run, or a dataset asked whole in the first round).

    Args:
        run: the model's plan.
        abbr: the dataset's abbr.
    """
    if not run.rounds:
        return None
    parts = sorted((p for s in run.shards for p in s.parts if p.dataset == abbr), key=lambda p: p.number or 0)
    return [r for p in parts for r in p.row_list()] if abbr in run.ladders else None


def plan_run(
    models: Sequence[dict],
    datasets: Sequence[dict],
    settings: RunSettings,
    logger: Any = None,
    limits: Limits | None = None,
    rule: EffectiveRule | None = None,
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
        rule: the run's effective-length rule (the summarizer's), which an adaptive run's ladder decides by.
    """
    limits = limits or Limits(settings, logger)
    planned = {d["abbr"]: planned_cells(d) or {} for d in datasets if is_needlebench(d)}
    variants, notes = plan_variants(models)
    for note in notes:
        if logger is not None:
            logger.warning(note)
    return RunPlan(
        settings,
        tuple(
            _model_run(limits, settings, m, datasets, planned, variants.get(str(m.get("abbr"))), rule) for m in models
        ),
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
        cfg["reader_cfg"]["test_range"] = part.test_range
    return cfg
