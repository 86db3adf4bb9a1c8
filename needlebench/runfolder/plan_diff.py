"""What differs between the plan a run stored and the plan its config gives now, said one line per difference.

A resume whose config's digest is not the stored one plans again to compare (``lifecycle.py``); every line here
is a reason it stops before any model call (or re-plans, when asked).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from ..methods.kv_press import PressSpec
from ..planning.run import ModelRun, RunPlan
from ..planning.settings import RunSettings
from ..planning.window import Window

__all__ = ["model_changes", "plan_changes"]


def plan_changes(stored: RunPlan, new: RunPlan) -> list[str]:
    """What differs between the plan a run stored and the plan its config gives now, one line per difference.

    Empty when they are the same run (the memory baseline aside). Each line names the setting, the model
    and the datasets it touches, with the stored value and the new one; a limit field that differs for many
    datasets of one model is one line, and so is a model's context window or RoPE scaling (a ``rope=`` added
    on a resume changes no limit, yet every answer is the scaled model's).

    Args:
        stored: the plan the run's infer stage stored (``needlebench_plan.json``).
        new: the plan the config gives now.
    """
    stored = RunPlan(stored.settings, tuple(m.first_round() for m in stored.models), stored.memory)  # rounds: runs'
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
        out.extend(f"{model.abbr}: {line}" for line in model_changes(old, model))
        for abbr in sorted(set(old.ladders) & set(model.ladders)):  # every round so far was bounded as stored
            before, after = old.ladders[abbr].graded, model.ladders[abbr].graded
            if before != after:
                out.append(f"{model.abbr} / {abbr}: the ladder's bounds {_BOUNDS[before]} -> {_BOUNDS[after]}")
    return out


_BOUNDS = {False: "for right-or-wrong scores", True: "for any score"}  # LadderGrid.graded, as a user reads it


def model_changes(old: ModelRun, new: ModelRun) -> list[str]:
    """What makes a model of the stored plan another model now, one line each: its context window or RoPE
    scaling, its KV-cache press. An answer the old one gave is not the new one's (``carryover.py`` drops them).

    Args:
        old: the model's plan as the run stored it.
        new: its plan as the config gives it now.
    """
    out = []
    if _window_key(old.window) != _window_key(new.window):
        before, after = _window_text(old.window), _window_text(new.window)
        if before == after:  # a difference the sentence does not show (the whose of a scaling, ...)
            before, after = repr(_window_key(old.window)), repr(_window_key(new.window))
        out.append(f"context window {before} -> {after}")
    if (old.method or None) != (new.method or None):
        out.append(f"KV-cache press {_method_text(old.method)} -> {_method_text(new.method)}")
    return out


def _method_text(method: Mapping[str, Any] | None) -> str:
    """A stored press (``methods.kv_press.PressSpec.to_dict``) as a user reads it."""
    return PressSpec.of(method).name if method else "none"


_WINDOW_FIELDS = ("native", "usable", "sliding", "scaling")  # what the window is; its source file aside


def _window_key(window: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    """What a stored window is (``planning.window.Window.to_dict``), for comparing: its source file aside."""
    return tuple(window.get(name) for name in _WINDOW_FIELDS) if window else None


def _window_text(window: Mapping[str, Any] | None) -> str:
    """A stored window as a user reads it (``native window 8,192, no RoPE scaling``)."""
    if not window:
        return "not known (no config.json read)"
    return Window(*(window.get(name) for name in _WINDOW_FIELDS), str(window.get("source") or "")).describe()
