"""The context window a model really has, read offline before any model call, and the cells that go past it.

Why: a model config's ``max_seq_len`` says what the run may send, not what the model was trained on. A model
with a 32k native window and no RoPE scaling, run at 128k, returns a grid of near-zeros that looks like a
result, after the GPU hours are spent. The window is in the model's own ``config.json``: its
``max_position_embeddings``; under a ``rope_scaling`` block, the ``original_max_position_embeddings`` it was
trained with and the factor that stretches it; a ``sliding_window`` where every layer slides. The run's own
scaling (the :func:`~needlebench.opencompass.models.rope_scaling` block a builder places where its engine reads
it, read back by :func:`needlebench.placement.asked_rope`) replaces the model's.

The file is read from a local model folder, or from the local Hugging Face cache for a hub name (nothing is
downloaded); where neither holds it (an API model, a scripted model), the window is unknown and nothing is
checked. A cell is past the window where its longest prompt, in the model's tokens (the cl100k count times the
limit's tokenizer ratio, the worst prompt's), plus the output budget does not fit.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..cache.rows import load_rows
from ..errors import ConfigError
from ..placement import asked_rope, scaling_of
from ..tasks import config_params, get_task

__all__ = ["Window", "beyond_cells", "check_windows", "kv_cache_bytes", "read_window"]


@dataclass(frozen=True)
class Window:
    """A model's context window as its config and the run's scaling make it.

    Args:
        native: the window the model was trained with (``original_max_position_embeddings`` under a
            scaling block, else ``max_position_embeddings``).
        usable: the window with the scaling in effect (``native`` times its factor; ``native`` without).
        sliding: the sliding window, where every layer attends only that far back; None otherwise.
        scaling: the RoPE scaling in effect (``kind``, ``factor``, ``original``), and whose (``by``: ``model``
            for the model's config, ``run`` for the run's setting); None without.
        source: the file it was read from.
    """

    native: int
    usable: int
    sliding: int | None
    scaling: Mapping[str, Any] | None
    source: str

    @property
    def limit(self) -> int:
        """The most tokens (prompt plus output) that stay inside the window."""
        return min(self.usable, self.sliding) if self.sliding else self.usable

    def describe(self) -> str:
        """``native window 8,192, no RoPE scaling``, ``scaled window 16,384: yarn x2 of 8,192, the run's``, ..."""
        if self.sliding and self.sliding < self.usable:
            return f"sliding window {self.sliding:,} on every layer"
        if not self.scaling:
            return f"native window {self.native:,}, no RoPE scaling"
        s = self.scaling
        whose = "the run's" if s.get("by") == "run" else "the model's config's"
        return f"scaled window {self.usable:,}: {s['kind']} x{s['factor']:g} of {s['original']:,}, {whose}"

    def to_dict(self) -> dict[str, Any]:
        """The window as JSON data (the plan stores it per model)."""
        return asdict(self)


def _config_file(path: str) -> Path | None:
    """The model's ``config.json``: in a local folder, or in the local Hugging Face cache (no download)."""
    folder = Path(path)
    if folder.is_dir():
        found = folder / "config.json"
        return found if found.is_file() else None
    if "/" not in path or path.startswith((".", "/")):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers brings it
        return None
    try:
        cached = try_to_load_from_cache(path, "config.json")
    except ValueError:  # not a hub name after all (a relative or ~ path that is no folder here)
        return None
    return Path(cached) if isinstance(cached, str) else None


def _model_config(model: Mapping[str, Any]) -> tuple[dict[str, Any], Path] | None:
    """A model config's ``config.json`` (its language part) and where it was read; None where it cannot be read
    offline (an API model, a scripted one, a hub name not in the local cache).

    Raises:
        ConfigError: a ``config.json`` that is not JSON.
    """
    path = model.get("path")
    if not path or model.get("openai_api_base"):
        return None
    found = _config_file(str(path))
    if found is None:
        return None
    try:
        config = json.loads(found.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"model {model.get('abbr', path)!r}: {found} cannot be read as JSON ({exc})") from None
    text = config.get("text_config")  # a multimodal model's language part, in the model's dtype
    return ({"torch_dtype": config.get("torch_dtype"), **text} if isinstance(text, dict) else config), found


# bytes per value of a config's torch_dtype (the KV cache is kept in it unless an engine is told otherwise)
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}


def kv_cache_bytes(model: Mapping[str, Any]) -> tuple[int, str] | None:
    """Bytes of KV cache per token of context, and how they add up (K and V, every layer, the KV heads, the dtype;
    MLA's compressed latent where the model has one); None where the model's ``config.json`` cannot be read
    offline or does not give its shape. Where some layers slide or keep no KV (hybrid models), the number is an
    upper bound and says so. Why: at 2M-8M tokens one sequence's cache can outgrow any device (a 7B model with 8
    KV heads of 128 over 32 layers keeps 1.2 GiB per 10k tokens in bfloat16), so the plan says it before any model
    loads. Raises ``ConfigError`` where that file is no JSON.

    Args:
        model: the model config whose ``path`` is read.
    """
    found = _model_config(model)
    config, source = found if found is not None else ({}, None)
    layers, heads = config.get("num_hidden_layers"), config.get("num_attention_heads")
    width = _DTYPE_BYTES.get(str(config.get("torch_dtype") or config.get("dtype") or "bfloat16"), 2)
    if isinstance(config.get("kv_lora_rank"), int) and isinstance(layers, int):  # MLA (DeepSeek-V2/V3): one latent
        latent = config["kv_lora_rank"] + int(config.get("qk_rope_head_dim") or 0)
        how = f"MLA latent {latent} x {layers} layers x {width} bytes, from {source}"
        return latent * layers * width, how
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or (
        config.get("hidden_size") // heads if heads and config.get("hidden_size") else None
    )
    if not all(isinstance(x, int) and x > 0 for x in (layers, kv_heads, head_dim)):
        return None
    how = f"K and V x {layers} layers x {kv_heads} KV heads x {head_dim} x {width} bytes, from {source}"
    hybrid = ("layer_types", "sliding_window_pattern", "layers_block_type", "attn_layer_indices")
    if any(config.get(k) for k in hybrid) or (
        config.get("sliding_window") and config.get("use_sliding_window") is not False
    ):
        how += "; an upper bound: some layers slide or keep no KV"
    return 2 * layers * kv_heads * head_dim * width, how


def read_window(model: Mapping[str, Any]) -> Window | None:
    """The window of a model config, or None where its ``config.json`` cannot be read offline.

    Args:
        model: the model config (its ``path``).

    Raises:
        ConfigError: a ``config.json`` that is not JSON.
    """
    read = _model_config(model)
    if read is None:
        return None
    config, found = read
    positions = config.get("max_position_embeddings")
    if not isinstance(positions, int) or positions <= 0:
        return None
    own = scaling_of(config.get("rope_scaling") or config.get("rope_parameters"))
    ask = asked_rope(model)
    sliding = config.get("sliding_window")
    layer_types = config.get("layer_types") or ()
    mixed = (  # some layers attend to everything (Gemma 2 and 3, Cohere 2 say it one of these ways)
        "full_attention" in layer_types
        or config.get("sliding_window_pattern") not in (None, 1)
        or config.get("cache_implementation") == "hybrid"
    )
    if not isinstance(sliding, int) or config.get("use_sliding_window") is False or mixed:
        sliding = None
    if ask:
        native = int((own or {}).get("original") or positions)
        original = int(ask["original"] or positions)  # as HF and LMDeploy scale without one: max_position_embeddings
        scaling = {**ask, "original": original, "by": "run"}
        usable = math.floor(original * ask["factor"])
    elif own:
        native = int(own["original"] or positions)
        scaling = {**own, "original": native, "by": "model"}
        # a linear block without its original: max_position_embeddings is already the window it gives
        stretched = native * own["factor"] if own["original"] or own["kind"] != "linear" else positions
        usable = max(positions, math.floor(stretched))
    else:
        native, usable, scaling = positions, positions, None
    return Window(native, usable, sliding, scaling, str(found))


def beyond_cells(window: Window, dataset: Mapping[str, Any], ratio: float, out_len: int) -> dict[str, Any] | None:
    """The cells of a dataset (as its model's limit leaves it) whose prompts do not fit the window.

    Args:
        window: the model's window.
        dataset: the limited dataset config (``limits.limited_dataset``: the prompts the model is sent).
        ratio: the model tokenizer's tokens per cl100k token (the limit's, at least 1).
        out_len: the output budget.

    Returns:
        None where every cell fits; else the task, language, the window's ``limit`` and ``describe()``, and
        ``cells`` as ``[coarse coordinate, samples past the window, the most model tokens of one]``.
    """
    rows = load_rows(dataset["task"], **config_params(dataset))
    spec = get_task(dataset["task"])
    past: dict[Any, list[int]] = defaultdict(lambda: [0, 0])
    for tokens, meta in zip(rows["prompt_tokens"], rows["meta"]):
        need = math.ceil(int(tokens) * ratio) + out_len
        if need > window.limit:
            cell = past[spec.cell_of(json.loads(meta))[0]]
            cell[0] += 1
            cell[1] = max(cell[1], need)
    if not past:
        return None
    return {
        "task": dataset["task"],
        "lang": dataset.get("lang", "en"),
        "limit": window.limit,
        "window": window.describe(),
        "cells": [[coord, n, most] for coord, (n, most) in sorted(past.items(), key=lambda x: str(x[0]))],
    }


def check_windows(models: Sequence[Any], policy: str) -> None:
    """Stop a run whose plan sends a model cells past its window, unless the run marks them (``policy``).

    Args:
        models: the plan's ``ModelRun`` entries (their ``window`` and ``beyond_window``).
        policy: ``stop`` or ``mark`` (``runtime(beyond_window=...)``).

    Raises:
        ConfigError: cells past a window under ``stop``: one message naming each model, its window and cells,
            and the ways on.
    """
    if policy == "mark":
        return
    parts = []
    for m in models:
        if not m.beyond_window:
            continue
        window = next(iter(m.beyond_window.values()))["window"]
        cells = ", ".join(
            f"{abbr} ({', '.join(str(c[0]) for c in entry['cells'])}: up to {max(c[2] for c in entry['cells']):,} tokens)"
            for abbr, entry in m.beyond_window.items()
        )
        parts.append(f"{m.abbr}: {window}; past it: {cells}")
    if parts:
        raise ConfigError(
            "context window: "
            + "; ".join(parts)
            + ". Either give the model RoPE scaling that covers these lengths (rope=rope_scaling('yarn', FACTOR, "
            "original_max_position_embeddings=NATIVE) in its builder), or drop these lengths from the datasets, or "
            "run them marked 'beyond window' in every table with runtime(beyond_window='mark')"
        )
