"""A model variant: which setting a model varies, its value, and which model it varies, recorded in the plan.

A sweep (``opencompass.models.sweep``) makes one model per value of an axis (a KV-cache press, a thinking budget,
a RoPE scaling factor) and stamps each config with ``needlebench_variant = {"axis": ..., "of": <the model it varies>}``. The
plan reads each model's setting where its engine takes it (:mod:`needlebench.placement`), never from its name,
and records a :class:`Variant`; reports, the board and ``results.json`` take value and baseline from there. A
model built by hand (a ``kvpress_model`` beside the plain one) finds the model it varies in the run by identity:
the same config once the axis's own setting, the name, the batch size and the devices are set aside.

A new axis is one :class:`Axis` in :data:`AXES` (how a config holds its setting, the value on a curve, the series
it belongs to, its name and labels) and, for its own columns, one entry in ``report.axes``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ConfigError
from ..methods.kv_press import PressSpec
from ..placement import HF, KVPRESS, asked_budget, asked_rope, engine_of, place_rope, without_budget

__all__ = ["AXES", "VARIANT_KEY", "Axis", "Variant", "axis", "plan_variants", "stamp", "variant_abbr"]

VARIANT_KEY = (
    "needlebench_variant"  # the model config key a sweep stamps; the partitioner removes it before OpenCompass builds
)
# What identity sets aside besides an axis's setting: the name, the stamp, and how a model is batched and placed
_NOT_IDENTITY = ("abbr", VARIANT_KEY, "batch_size", "run_cfg")


@dataclass(frozen=True)
class Axis:
    """One way a model is varied.

    Args:
        name: the axis (``"press"``, ``"thinking"``, ``"rope"``).
        title: the curve's x-axis title.
        neutral: the value of a model without the setting (ratio 0, factor 1); None where it has none.
        read: the setting a config holds, as JSON data; None where it holds none.
        value: a setting's value on the curve.
        series: the curve a setting is drawn on (press and query mode; RoPE kind); ``""`` for one curve.
        part: what the setting adds to a swept model's name.
        labels: a board row's labels for a setting; None: the model the variants vary (``press: none``).
        without: the config with the setting taken off (for identity).
    """

    name: str
    title: str
    neutral: float | None
    read: Callable[[Mapping[str, Any]], dict[str, Any] | None]
    value: Callable[[Mapping[str, Any]], float]
    series: Callable[[Mapping[str, Any]], str]
    part: Callable[[Mapping[str, Any] | None], str]
    labels: Callable[[Mapping[str, Any] | None], dict[str, str]]
    without: Callable[[dict[str, Any]], dict[str, Any]]


def _press(model: Mapping[str, Any]) -> dict[str, Any] | None:
    press = model.get("kv_press")
    return PressSpec.of(press, str(model.get("abbr"))).to_dict() if press is not None else None


def _no_press(model: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in model.items() if k != "kv_press"}
    if engine_of(model) == KVPRESS:
        out["type"] = HF
    return out


def _press_labels(s: Mapping[str, Any] | None) -> dict[str, str]:
    if s is None:
        return {"press": "none", "ratio": "0.00", "query": ""}
    return {"press": str(s["press"]), "ratio": f"{float(s['compression_ratio']):.2f}", "query": str(s["query"])}


def _no_rope(model: dict[str, Any]) -> dict[str, Any]:
    return place_rope(model, None) if asked_rope(model) else model


def _rope_part(s: Mapping[str, Any] | None) -> str:
    return f"{s['kind']}-x{float(s['factor']):g}" if s else "rope-x1"


def _rope_labels(s: Mapping[str, Any] | None) -> dict[str, str]:
    return {"rope": str(s["kind"]), "factor": f"{float(s['factor']):g}"} if s else {"rope": "none", "factor": "1"}


AXES: dict[str, Axis] = {
    a.name: a
    for a in (
        Axis(
            "press",
            "KV-cache compression ratio",
            0.0,
            _press,
            lambda s: float(s["compression_ratio"]),
            lambda s: f"{str(s['press']).removesuffix('Press')} {s['query']}",
            lambda s: PressSpec.of(s).name if s else "none",
            _press_labels,
            _no_press,
        ),
        Axis(
            "thinking",
            "thinking budget (tokens)",
            None,
            asked_budget,
            lambda s: float(s["budget"]),
            lambda s: "",
            lambda s: f"think-{s['budget']}" if s else "think-none",
            lambda s: {"thinking budget": str(s["budget"]) if s else "none"},
            without_budget,
        ),
        Axis(
            "rope",
            "RoPE scaling factor",
            1.0,
            asked_rope,
            lambda s: float(s["factor"]),
            lambda s: str(s["kind"]),
            _rope_part,
            _rope_labels,
            _no_rope,
        ),
    )
}


def axis(name: str) -> Axis:
    """The axis named ``name``.

    Args:
        name: one of :data:`AXES`.

    Raises:
        ConfigError: an unknown axis, naming the known ones.
    """
    if name not in AXES:
        raise ConfigError(f"axis {name!r}; choose from {sorted(AXES)}")
    return AXES[name]


@dataclass(frozen=True)
class Variant:
    """What one model of a run varies, as the plan records it.

    Args:
        axis: the axis (:data:`AXES`).
        setting: the setting as the config holds it (JSON data); None: the axis's neutral setting (RoPE factor 1).
        value: the setting's value on the curve.
        series: the curve it is drawn on.
        of: the model it varies (a sweep's stamp, else the run's model of the same identity); None: none found.
    """

    axis: str
    setting: Mapping[str, Any] | None
    value: float | None
    series: str
    of: str | None

    def to_dict(self) -> dict[str, Any]:
        """The variant as JSON data (the plan's ``model_variant``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Variant:
        """A variant from :meth:`to_dict`'s data.

        Args:
            data: the JSON data.
        """
        value = data.get("value")
        return cls(
            str(data["axis"]),
            data.get("setting"),
            None if value is None else float(value),
            str(data.get("series", "")),
            data.get("of"),
        )

    @property
    def labels(self) -> dict[str, str]:
        """Its board labels (press, ratio and query for a press)."""
        return AXES[self.axis].labels(self.setting)


def stamp(model: Mapping[str, Any], axis_name: str, of: str) -> dict[str, Any]:
    """A copy of ``model`` stamped as a variant on ``axis_name`` of the model named ``of``.

    Args:
        model: the varied model's config.
        axis_name: the axis it varies.
        of: the abbr of the model it varies.
    """
    return {**model, VARIANT_KEY: {"axis": axis(axis_name).name, "of": str(of)}}


def variant_abbr(of: str, axis_name: str, setting: Mapping[str, Any] | None) -> str:
    """A swept model's name, ``<of>@<part>`` (``smollm2@snapkv-0.50-agnostic``, ``qwen@think-1024``, ``qwen@yarn-x4``).

    Args:
        of: the abbr of the model it varies.
        axis_name: the axis.
        setting: the setting, as the axis reads it from the config (None: neutral).
    """
    return f"{of}@{axis(axis_name).part(setting)}"


def _identity(model: Mapping[str, Any]) -> str:
    """What must match between a variant (its axis's setting taken off) and the model it varies."""
    kept = {k: v for k, v in model.items() if k not in _NOT_IDENTITY}
    return json.dumps(kept, sort_keys=True, default=str)


def _stamped(model: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The stamp of a config, checked (a stamp is written by :func:`stamp` or by hand as ``baseline=``)."""
    found = model.get(VARIANT_KEY)
    if found is None:
        return None
    if not isinstance(found, Mapping) or set(found) != {"axis", "of"}:
        raise ConfigError(f"model {model.get('abbr')!r}: {VARIANT_KEY}={found!r}; a dict of 'axis' and 'of'")
    axis(str(found["axis"]))
    return found


def plan_variants(models: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Variant], list[str]]:
    """Each varied model's :class:`Variant`, and one line per variant whose model it varies is not in the run.

    A stamped model varies its stamp's axis; an unstamped one the first axis whose setting it holds other than
    neutral (a press model; an API model with a thinking budget; a model scaled by RoPE when nothing in the run
    is the same model unscaled, it is a model of its own and no variant). The model it varies is the stamp's, else
    the run's model that is the same once that setting is taken off.

    Args:
        models: the run's model configs, in config order.

    Raises:
        ConfigError: a stamp that is not ``{"axis", "of"}`` or names an unknown axis.
    """
    identities = {str(m.get("abbr")): _identity(m) for m in models}
    out: dict[str, Variant] = {}
    notes: list[str] = []
    for m in models:
        abbr = str(m.get("abbr"))
        stamped = _stamped(m)
        names = [stamped["axis"]] if stamped else [a for a in AXES if AXES[a].read(m) is not None]
        for name in names:
            ax = AXES[name]
            setting = ax.read(m)
            bare = _identity(ax.without(dict(m)))
            same = next((a for a, i in identities.items() if a != abbr and i == bare), None)
            of = str(stamped["of"]) if stamped else same
            if of is None and name != "press" and not stamped:
                continue  # a scaled or budgeted model with nothing to compare it with is a model of its own
            value = ax.value(setting) if setting is not None else ax.neutral
            out[abbr] = Variant(name, setting, value, ax.series(setting) if setting else "", of)
            if of is None:
                notes.append(
                    f"model {abbr!r}: no model of the run is the same without its {name} setting, so it has no "
                    "baseline; name one with kvpress_model(..., baseline=...) or add that model to the run"
                )
            elif of not in identities and name == "press":
                notes.append(
                    f"model {abbr!r}: compresses {of!r}, which is not in the run: it is shown without a baseline"
                )
            break
    return out, notes
