"""KV-cache compression as a method of a run: one kvpress press, its ratio and its query mode.

A :class:`PressSpec` is what a method model says about itself: the press by its kvpress class name, the
share of the context's KV cache it removes, whether it compresses before the question is seen
(``"agnostic"``) or with it (``"aware"``), and the press's own settings. The plan, the tables, the report
and ``results.json`` read it from the model config (``kv_press``); the model adapter
(``opencompass/kvpress_model.py``) builds the press from it.

Checks come before any model loads, in one line each: a ratio outside [0, 1), an unknown query mode, a
press the installed kvpress does not have (listing the ones it has), a query mode the press cannot run
(FinchPress finds its window from a delimiter before the question, so it needs the question in the
compressed prefill: ``"aware"`` only), and presses that compress while decoding, which this adapter does
not run.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError

__all__ = [
    "QUERY_MODES",
    "AWARE_ONLY",
    "PressSpec",
    "press_names",
    "check_press",
    "build_press",
    "KVPRESS_INSTALL",
]

QUERY_MODES = ("agnostic", "aware")
# presses that compress with the question in the prefill only: Finch's window is the text after its delimiter
AWARE_ONLY = frozenset({"FinchPress"})
# presses that compress while decoding (kvpress's pipeline runs them in its decoding loop): not run here
_DECODING = ("DecodingPress", "PrefillDecodingPress", "DMSPress")
# how kvpress goes beside OpenCompass (docs/guide/kv-compression.md: its numpy>=2 pin is not needed here)
KVPRESS_INSTALL = 'pip install --no-deps "kvpress==0.5.5" "cachetools>=5.5.2,<6" "fire>=0.6,<0.7"'


@dataclass(frozen=True)
class PressSpec:
    """One KV-cache compression method.

    Attributes:
        press: the kvpress class name (``"SnapKVPress"``); ``""`` for the uncompressed baseline.
        compression_ratio: the share of the compressed tokens' cache entries removed, in [0, 1).
        query: ``"agnostic"``: the context (the prompt before its question) is prefilled and compressed, then
            the question prefilled uncompressed; ``"aware"``: the whole prompt is compressed.
        settings: further arguments of the press's constructor (``window_size=32``); a wrapper press's inner
            press by name under ``"press"``.
    """

    press: str
    compression_ratio: float = 0.0
    query: str = "agnostic"
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """``snapkv-0.50-agnostic``: what a sweep appends to the model's abbr."""
        short = re.sub(r"Press$", "", self.press).lower() or "none"
        return f"{short}-{self.compression_ratio:.2f}-{self.query}"

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON data (the model config's ``kv_press``, the plan's and ``results.json``'s)."""
        return {
            "press": self.press,
            "compression_ratio": float(self.compression_ratio),
            "query": self.query,
            "settings": dict(self.settings),
        }

    @classmethod
    def of(cls, data: Mapping[str, Any], abbr: str = "model") -> PressSpec:
        """A spec from :meth:`to_dict`'s data, checked without kvpress (ratio, query mode, keys).

        Args:
            data: the model config's ``kv_press``.
            abbr: the model's name, for the message.

        Raises:
            ConfigError: an unknown key, a ratio outside [0, 1) or an unknown query mode.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"model {abbr!r}: kv_press must be a dict, not {type(data).__name__}")
        unknown = sorted(set(data) - {"press", "compression_ratio", "query", "settings"})
        if unknown:
            raise ConfigError(f"model {abbr!r}: kv_press has unknown keys {unknown}")
        ratio = data.get("compression_ratio", 0.0)
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio < 1:
            raise ConfigError(f"model {abbr!r}: compression_ratio {ratio!r} is outside [0, 1)")
        query = data.get("query", "agnostic")
        if query not in QUERY_MODES:
            raise ConfigError(f"model {abbr!r}: query {query!r}; choose from {QUERY_MODES}")
        settings = data.get("settings") or {}
        if not isinstance(settings, Mapping):
            raise ConfigError(f"model {abbr!r}: kv_press settings must be a dict of the press's arguments")
        return cls(str(data.get("press") or ""), float(ratio), str(query), dict(settings))


def _kvpress() -> Any:
    """The installed kvpress module, or one line saying how to install it beside OpenCompass."""
    try:
        return importlib.import_module("kvpress")
    except ImportError as exc:
        raise ConfigError(f"KV-cache presses need kvpress ({exc}); install it with: {KVPRESS_INSTALL}") from None


def press_names() -> tuple[str, ...]:
    """The press classes the installed kvpress has, by name (imports kvpress, and with it torch)."""
    module = _kvpress()
    base = module.BasePress
    return tuple(
        sorted(n for n in dir(module) if isinstance(getattr(module, n), type) and issubclass(getattr(module, n), base))
    )


def check_press(spec: PressSpec, abbr: str = "model") -> None:
    """Refuse a press this adapter cannot run, before any model loads.

    Args:
        spec: the method.
        abbr: the model's name, for the message.

    Raises:
        ConfigError: kvpress missing, an unknown press (listing the installed ones), a decoding press, a
            query mode the press does not support, or settings its constructor does not take.
    """
    if not spec.press:
        return
    names = press_names()
    if spec.press not in names:
        raise ConfigError(f"model {abbr!r}: unknown press {spec.press!r}; the installed kvpress has {', '.join(names)}")
    if spec.press in _DECODING:
        raise ConfigError(f"model {abbr!r}: {spec.press} compresses while decoding; only prefill presses run here")
    if spec.press in AWARE_ONLY and spec.query != "aware":
        raise ConfigError(
            f"model {abbr!r}: {spec.press} does not support query={spec.query!r}; it needs the question in the "
            "compressed prefill (query='aware')"
        )
    build_press(spec, abbr)  # a setting its constructor does not take, said now


def build_press(spec: PressSpec, abbr: str = "model") -> Any:
    """The kvpress press object of a spec (None for the baseline).

    A press with a ``compression_ratio`` field gets the ratio; a wrapper press (``AdaKVPress``,
    ``ChunkPress``...) gets its inner press, named in ``settings["press"]``, built with the ratio.

    Args:
        spec: the method.
        abbr: the model's name, for the message.

    Raises:
        ConfigError: an argument the press does not take, or a wrapper press without its inner press.
    """
    if not spec.press:
        return None
    module = _kvpress()
    cls = getattr(module, spec.press)
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    settings = dict(spec.settings)
    try:
        if "compression_ratio" in fields:
            return cls(compression_ratio=spec.compression_ratio, **settings)
        inner = settings.pop("press", None)
        if "press" not in fields or not inner:
            raise ConfigError(
                f"model {abbr!r}: {spec.press} wraps a press; name it in settings, e.g. press='SnapKVPress'"
            )
        return cls(press=build_press(PressSpec(str(inner), spec.compression_ratio, spec.query), abbr), **settings)
    except (TypeError, AssertionError, ValueError) as exc:
        raise ConfigError(f"model {abbr!r}: {spec.press}({settings}) refused: {exc}") from None
