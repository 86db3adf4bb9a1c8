"""What differs between the plan a run stored and the plan its config gives now, said one line per difference.

A resume whose config's digest is not the stored one plans again to compare (``lifecycle.py``); every line here
is a reason it stops before any model call (or re-plans, when asked).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict

from ..planning.run import RunPlan
from ..planning.settings import RunSettings

__all__ = ["plan_changes"]


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
