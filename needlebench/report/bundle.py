"""A run's result bundle, ``results.json``: what made its numbers, the numbers, and digests of its samples.

Written into a run's summary folder beside the tables (by the summarizer, ``needlebench score`` and
``needlebench report`` of one run), so whoever posts a leaderboard row can hand over one file that says
where it came from: the package and OpenCompass versions, the dataset version, protocol, profile and
options the samples were made with, the haystack corpora (with digests of the files on the machine that
wrote it), a digest of the run's config, every table's numbers per model and cell with counts and
intervals, the run's leaderboard rows, and a digest of every graded sample.

``needlebench verify BUNDLE RUN`` (:func:`verify_bundle`) recomputes the bundle from the run's graded samples
and lists exactly what differs: a sample changed, added or missing, a number, a count, a version, the config.
Facts of the machine rather than of the samples (package versions, the corpus files found here) are
reported beside the result, never as a failure: another machine may hold other files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import platform
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..aggregate.effective_length import EffectiveRule
from ..context.corpora import corpus_digest
from ..errors import ConfigError
from ..files import atomic_write
from ..planning.costs import Prices
from ..record import GradedSample
from ..runfolder.request_log import read_requests, request_totals
from ..runfolder.retries import retry_totals
from ..runfolder.score_record import config_files
from ..tasks import all_tasks
from .axes import VIEWS, axis_table, variants_of
from .comparability import REFERENCE_CORPUS
from .ladder import ADAPTIVE_TABLE, ladder_decisions, ladder_table, ladder_views
from .leaderboard import PUBLISHED, build_boards
from .ledger import LEDGER_TABLE, cost_ledger
from .parity_link import find_parity_link, installed_version
from .results import RunResults, load_results, run_dirs
from .tables import effective_length_table, summary_table

__all__ = [
    "BUNDLE",
    "SCHEMA",
    "make_bundle",
    "write_bundle",
    "verify_bundle",
    "report_tables",
    "Verification",
]

BUNDLE = "results.json"
SCHEMA = 1
_TOLERANCE = 1e-6  # numbers are recomputed, not copied: the same code gives the same floats, but not bit-exact JSON


def _plain(value: Any) -> Any:
    """A table value as JSON: numpy scalars as Python ones, NaN and pandas' NA as null."""
    if value is pd.NA:
        return None
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(float(value)) else float(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def report_tables(results: RunResults) -> dict[str, pd.DataFrame]:
    """The report's tables of numbers (the summary and every task's own), as ``needlebench report`` writes them.

    Args:
        results: the records of the run.
    """
    out: dict[str, pd.DataFrame] = {}
    skipped = results.skipped()
    views = ladder_views(results)
    summary = summary_table(results.records, results.models, skipped, results.planned(), results.beyond)
    if not summary.empty:
        out["needlebench_summary"] = summary
        out["needlebench_effective_length"] = effective_length_table(
            results.records,
            results.models,
            skipped,
            results.planned(),
            results.effective_rule,
            results.claimed,
            results.beyond,
            ladder_decisions(views),
        )
    if views:
        out[ADAPTIVE_TABLE] = ladder_table(views)
    for spec in all_tasks():
        report = spec.aggregation().report
        mine = [r for r in results.records if r.task == spec.name]
        if report and mine:
            out.update(report(mine, results.models, skipped).tables)
    variants = variants_of(results.variants, results.records)
    for axis, view in VIEWS.items():
        table = axis_table(results.records, variants, axis)
        if not table.empty:
            out[view.table] = table
    ledger = cost_ledger(results.records, results.models, results.model_plans, results.prices)
    if not ledger.empty:
        out[LEDGER_TABLE] = ledger
    return out


def _samples(results: RunResults) -> dict[str, Any]:
    """Digests of the graded samples: per (model, dataset) one per sample id, one for the dataset, one for all.

    A sample's digest is of its whole record as written (:meth:`GradedSample.to_json`, model and dataset
    included, its request's cost left out), keys sorted."""
    per: dict[str, dict[str, str]] = defaultdict(dict)
    for r in results.records:
        # a request's cost is the clock's (two runs of one config differ there alone): the ledger's table checks it
        kept = {k: v for k, v in r.to_json().items() if k != "cost"}
        text = json.dumps(kept, sort_keys=True, ensure_ascii=False, default=str)
        per[f"{r.model}/{r.dataset}"][r.id] = _digest(text.encode("utf-8"))[:16]
    datasets = {}
    whole = hashlib.sha256()
    for name in sorted(per):
        ids = dict(sorted(per[name].items()))
        joined = "".join(f"{i}:{d}\n" for i, d in ids.items()).encode("utf-8")
        datasets[name] = {"count": len(ids), "digest": _digest(joined), "ids": ids}
        whole.update(f"{name}\n".encode() + joined)
    return {"count": sum(len(v) for v in per.values()), "digest": whole.hexdigest(), "datasets": datasets}


def _config(runs: Sequence[Path]) -> dict[str, Any]:
    """Digests of what configured the run: OpenCompass's dump of the config (``configs/*.py``) or the record
    ``needlebench score`` keeps of the export it graded (``needlebench_score.json``)."""
    files = {}
    for run in runs:
        for path in config_files(run):
            files[f"{run.name}/{path.relative_to(run).as_posix()}"] = _digest(path.read_bytes())
    joined = "".join(f"{k}:{v}\n" for k, v in sorted(files.items())).encode("utf-8")
    return {"files": files, "digest": _digest(joined) if files else None}


def _corpora(records: Sequence[GradedSample]) -> dict[str, Any]:
    """Each haystack corpus the samples name, with its sample count and a digest of its files on this machine."""
    found: dict[tuple[str, str], int] = defaultdict(int)
    for r in records:
        if r.get("corpus"):
            found[(str(r.fields["corpus"]), r.lang)] += 1
    out = {}
    for (name, lang), n in sorted(found.items()):
        choice = "opencompass" if name.startswith(REFERENCE_CORPUS) else ("packaged" if "@" in name else None)
        try:
            digest = corpus_digest(lang, choice) if choice else "not checked (a file given by path)"
        except ConfigError as exc:
            digest = f"unavailable here ({exc})"
        out[f"{name} ({lang})"] = {"samples": n, "files_here": digest}
    return out


def _counts(records: Sequence[GradedSample], key: str) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for r in records:
        value = r.get(key)
        out[json.dumps(value, sort_keys=True) if isinstance(value, Mapping) else str(value)] += 1
    return dict(sorted(out.items()))


def _options(records: Sequence[GradedSample]) -> dict[str, dict[str, int]]:
    per: dict[str, list[GradedSample]] = defaultdict(list)
    for r in records:
        per[r.task].append(r)
    return {task: _counts(rows, "options") for task, rows in sorted(per.items())}


def _board_rows(results: RunResults, source: str) -> list[dict[str, Any]]:
    out = []
    for board in build_boards(results, source, published=False):
        for r in board.rows:
            if r.kind == PUBLISHED:
                continue
            out.append(
                {
                    "board": board.title,
                    "model": r.model,
                    "labels": dict(r.labels),
                    "comparable": r.comparability.text if r.comparability else "",
                    "complete": r.complete,
                    "planned": r.planned,
                    "scored": r.scored,
                    "cells": {
                        k: {"value": c.value, "low": c.low, "high": c.high, "complete": c.complete}
                        for k, c in sorted(r.cells.items())
                    },
                }
            )
    return _plain(out)


def make_bundle(results: RunResults, runs: Sequence[Path]) -> dict[str, Any]:
    """The bundle of one run (or one work dir), from its records.

    Args:
        results: the records read from it (:func:`~needlebench.report.results.load_results` of that one path).
        runs: its run folders (``configs/`` and ``needlebench_score.json`` are read there).
    """
    records = results.records
    tables = report_tables(results)
    return {
        "schema": SCHEMA,
        "what": "needlebench results bundle: check it with `needlebench verify results.json RUN`",
        "made_with": {
            "needlebench": installed_version("needlebench"),
            "opencompass": installed_version("opencompass"),
            "python": platform.python_version(),
        },
        "runs": [r.name for r in runs],
        "models": results.models,
        "variants": {m: v.to_dict() for m, v in sorted(variants_of(results.variants, records).items())},
        "dataset_version": _counts(records, "version"),
        "protocol": _counts(records, "protocol"),
        "profile": _counts(records, "profile"),
        "options": _options(records),
        "corpora": _corpora(records),
        "config": _config(runs),
        "samples": _samples(results),
        "effective_length": {"rule": dataclasses.asdict(results.effective_rule), "claimed": results.claimed_given},
        "prices": results.prices.to_dict() if results.prices is not None else None,
        "tables": {name: _plain(df.to_dict(orient="records")) for name, df in sorted(tables.items())},
        "leaderboard": _board_rows(results, runs[0].name if len(runs) == 1 else "work dir"),
        "retries": {m: _retries(runs, m) for m in results.models},
        "requests": {
            m: request_totals([r for run in runs for r in read_requests(run / "predictions" / m)])
            for m in results.models
        },
        "parity": _parity(runs, records),
        "adaptive": [v.to_dict() for v in ladder_views(results)],
    }


def _parity(runs: Sequence[Path], records: Sequence[GradedSample]) -> dict[str, Any] | None:
    """The run's link to the parity proof beside it (``parity_link``), None where there is none."""
    link = find_parity_link(runs, records)
    return link.to_dict() if link is not None else None


def _retries(runs: Sequence[Path], model: str) -> dict[str, int]:
    """A model's failed requests asked again in these runs (``retries.retry_totals``), summed."""
    totals = [retry_totals(run / "predictions" / model) for run in runs]
    return {
        "asked_again": sum(t["asked_again"] for t in totals),
        "passes": max((t["passes"] for t in totals), default=0),
        "still_failed": sum(t["still_failed"] for t in totals),
    }


def write_bundle(
    path: Path,
    out: Path,
    rule: EffectiveRule | None = None,
    claimed: Mapping[str, int] | None = None,
    prices: Prices | None = None,
) -> Path:
    """Compute the bundle of one run or work dir and write it as ``out/results.json`` (atomically).

    Args:
        path: the run folder or work dir (as given to ``needlebench report``).
        out: the summary folder.
        rule: how effective lengths are read (default: ``EffectiveRule()``); recorded in the bundle.
        claimed: claimed lengths given explicitly (over the plan's ``max_seq_len``); recorded in the bundle.
        prices: the prices the ledger's money is counted at; recorded in the bundle.

    Returns:
        The file written.
    """
    results = load_results([path])
    results.effective_rule = rule or EffectiveRule()
    results.claim(claimed)
    results.prices = prices
    bundle = make_bundle(results, run_dirs(path) or [path])
    target = out / BUNDLE
    with atomic_write(target) as tmp:
        tmp.write_text(json.dumps(bundle, indent=1, ensure_ascii=False, sort_keys=False), encoding="utf-8")
    return target


@dataclass
class Verification:
    """What ``needlebench verify`` found.

    Attributes:
        failures: every difference between the bundle and the run's samples (any one fails the check).
        notes: differences of the machine, not of the samples (versions, corpus files found here).
        samples: samples checked.
        numbers: numbers compared.
    """

    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    samples: int = 0
    numbers: int = 0

    @property
    def ok(self) -> bool:
        """Nothing differs."""
        return not self.failures


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=0, abs_tol=_TOLERANCE)
    return a == b


def _row_label(row: Mapping[str, Any], index: int) -> str:
    keys = [f"{v}" for v in list(row.values())[:3] if isinstance(v, (str, int)) and not isinstance(v, bool)]
    return f"row {index + 1} ({' '.join(keys)})" if keys else f"row {index + 1}"


def _compare_rows(
    name: str, posted: Sequence[Mapping[str, Any]], found: Sequence[Mapping[str, Any]], v: Verification
) -> None:
    if len(posted) != len(found):
        v.failures.append(f"{name}: {len(posted)} rows in the bundle, {len(found)} from the samples")
    for i, (a, b) in enumerate(zip(posted, found)):
        for column in dict.fromkeys([*a, *b]):
            x, y = a.get(column), b.get(column)
            if isinstance(x, Mapping) and isinstance(y, Mapping):
                _compare_rows(f"{name} {_row_label(a, i)} {column}", [x], [y], v)
                continue
            v.numbers += isinstance(x, (int, float)) and not isinstance(x, bool)
            if not _same(x, y):
                v.failures.append(f"{name} {_row_label(a, i)}: {column} is {x!r} in the bundle, {y!r} from the samples")


def _compare_samples(posted: Mapping[str, Any], found: Mapping[str, Any], v: Verification) -> None:
    mine, theirs = posted.get("datasets", {}), found.get("datasets", {})
    for name in sorted(set(mine) | set(theirs)):
        a, b = mine.get(name), theirs.get(name)
        if a is None:
            v.failures.append(f"samples: {name} ({b['count']} samples) is in the run, not in the bundle")
            continue
        if b is None:
            v.failures.append(f"samples: {name} ({a['count']} samples) is in the bundle, not in the run")
            continue
        if a.get("digest") == b.get("digest"):
            continue
        ids_a, ids_b = a.get("ids", {}), b.get("ids", {})
        changed = sorted(i for i in set(ids_a) & set(ids_b) if ids_a[i] != ids_b[i])
        gone, new = sorted(set(ids_a) - set(ids_b)), sorted(set(ids_b) - set(ids_a))
        for what, ids in (("changed", changed), ("missing from the run", gone), ("not in the bundle", new)):
            if ids:
                shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
                v.failures.append(f"samples: {name}: {len(ids)} sample(s) {what}: {shown}")
    if posted.get("digest") != found.get("digest") and not any(f.startswith("samples:") for f in v.failures):
        v.failures.append("samples: the digest of all samples differs")


def verify_bundle(bundle: Path, run: Path) -> Verification:
    """Recompute a bundle from a run's graded samples and list what differs.

    Args:
        bundle: the ``results.json`` to check.
        run: the run folder or work dir it claims to come from.

    Raises:
        ConfigError: the bundle is missing, not JSON or not a results bundle, or the run does not exist.
    """
    try:
        posted = json.loads(bundle.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"verify: cannot read {bundle} ({exc})") from None
    except ValueError as exc:
        raise ConfigError(f"verify: {bundle} is not JSON ({exc})") from None
    if not isinstance(posted, dict) or posted.get("schema") != SCHEMA or "samples" not in posted:
        raise ConfigError(f"verify: {bundle} is not a needlebench results bundle (schema {SCHEMA})")
    if not run.exists():
        raise ConfigError(f"verify: run {run} does not exist")
    results = load_results([run])
    read = posted.get("effective_length")
    if isinstance(read, dict):  # the rule and claimed lengths the bundle's effective lengths were read with
        try:
            results.effective_rule = EffectiveRule.of(read.get("rule"))
            results.claim(read.get("claimed"))
        except ConfigError as exc:
            raise ConfigError(f"verify: {bundle}: effective_length {read!r} is not readable ({exc})") from None
    if isinstance(posted.get("prices"), dict):  # the prices the bundle's ledger was priced at
        try:
            results.prices = Prices.from_dict(posted["prices"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"verify: {bundle}: prices are not readable ({type(exc).__name__}: {exc})") from None
    found = make_bundle(results, run_dirs(run) or [run])
    v = Verification(samples=found["samples"]["count"])
    unreadable = [r for r in results.records if r.unscored == "unreadable"]
    if unreadable:  # the numbers may match the bundle, but neither can say what those samples scored
        v.failures.append(
            f"samples: {len(unreadable)} planned record(s) of the run cannot be read back "
            f"({unreadable[0].dataset}: {unreadable[0].error_detail})"
        )
    _compare_samples(posted["samples"], found["samples"], v)
    for view in found["adaptive"]:  # each round must be what the records before it decide
        if view["replay"] is not None:
            v.failures.append(f"adaptive {view['model']} / {view['dataset']}: {view['replay']}")
    _compare_rows("adaptive", posted.get("adaptive", []), found["adaptive"], v)
    posted.setdefault("variants", {})  # a bundle made before variants were recorded: a run without any
    for key in ("models", "variants", "dataset_version", "protocol", "profile", "options"):
        if posted.get(key) != found[key]:
            v.failures.append(f"{key}: {posted.get(key)!r} in the bundle, {found[key]!r} from the samples")
    if posted.get("config", {}).get("files") != found["config"]["files"]:
        v.failures.append(
            f"config: {posted.get('config', {}).get('files')!r} in the bundle, {found['config']['files']!r} in the run"
        )
    names = (set(posted.get("corpora", {})), set(found["corpora"]))
    if names[0] != names[1]:
        v.failures.append(f"corpora: {sorted(names[0])} in the bundle, {sorted(names[1])} from the samples")
    for name in sorted(set(posted.get("tables", {})) | set(found["tables"])):
        _compare_rows(f"table {name}", posted.get("tables", {}).get(name, []), found["tables"].get(name, []), v)
    _compare_rows("leaderboard", posted.get("leaderboard", []), found["leaderboard"], v)
    claimed, here = posted.get("parity"), found["parity"]
    if claimed and claimed.get("checked") and not (here and here.get("checked")):
        why = here["why"] if here else "no parity.json beside the run"
        v.failures.append(f"parity: the bundle says checked against OpenCompass on these files; here: {why}")
    elif claimed and here and claimed.get("sha256") != here.get("sha256"):
        v.failures.append(f"parity: {claimed.get('file')} changed since the bundle was made")
    for dist, version in (posted.get("made_with") or {}).items():
        here = found["made_with"].get(dist)
        if version != here:
            v.notes.append(f"made with {dist} {version}; checked with {here}")
    for name, info in (posted.get("corpora") or {}).items():
        here = found["corpora"].get(name, {}).get("files_here")
        if info.get("files_here") != here:
            v.notes.append(f"corpus {name}: files digest {info.get('files_here')} where it was made, {here} here")
    return v
