"""Model configs read from files and checked without their engines.

``load_models`` gives an eval config its models from the files ``$NEEDLEBENCH_MODELS`` names (else its default);
``check_model`` finds what is wrong with a model config without importing its engine, so vLLM and LMDeploy configs
are checked on machines that cannot install them.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

from mmengine.config import Config

from ..errors import ConfigError
from ..methods.kv_press import PressSpec
from ..placement import API, HF, KVPRESS, LMDEPLOY, VLLM, engine_of
from ..planning.limits import DEFAULT_MAX_SEQ_LEN
from ..tasks import type_name

__all__ = ["check_model", "load_models"]

_REQUIRED = {
    HF: ("path", "max_out_len", "batch_size"),
    VLLM: ("path", "max_out_len", "batch_size", "model_kwargs"),
    LMDEPLOY: ("path", "max_out_len", "batch_size", "engine_config", "gen_config"),
    API: ("path", "openai_api_base", "max_out_len"),
    KVPRESS: ("path", "max_out_len", "batch_size", "kv_press"),
}


def check_model(cfg: dict[str, Any]) -> list[str]:
    """Problems with a model config, without importing its engine (empty list = fine)."""
    problems: list[str] = []
    name = type_name(cfg.get("type"))
    key = engine_of(cfg)
    if key is None:
        return [f"unknown model type {name!r}; choose from {sorted(v.rsplit('.', 1)[1] for v in _REQUIRED)}"]
    for field in _REQUIRED[key]:
        if cfg.get(field) in (None, ""):
            problems.append(f"{cfg.get('abbr', '?')}: missing {field}")
    if problems:  # the checks below read those fields
        return problems
    msl, out = cfg.get("max_seq_len") or 0, cfg.get("max_out_len") or 0
    if msl and out and out >= msl:
        problems.append(f"{cfg.get('abbr')}: max_out_len {out} leaves no room in max_seq_len {msl}")
    if key == VLLM:
        mk = cfg["model_kwargs"]
        if mk.get("max_model_len") and mk["max_model_len"] < msl:
            problems.append(f"{cfg.get('abbr')}: vLLM max_model_len {mk['max_model_len']} < max_seq_len {msl}")
        tp = mk.get("tensor_parallel_size", 1)
        if cfg.get("run_cfg", {}).get("num_gpus", tp) != tp:
            problems.append(f"{cfg.get('abbr')}: run_cfg.num_gpus differs from tensor_parallel_size {tp}")
    if key == LMDEPLOY:
        session = cfg["engine_config"].get("session_len", 0)
        if session < msl:
            problems.append(f"{cfg.get('abbr')}: session_len {session} < max_seq_len {msl}")
        if cfg["gen_config"].get("max_new_tokens", out) != out:
            problems.append(f"{cfg.get('abbr')}: gen_config.max_new_tokens differs from max_out_len {out}")
    if key == API and not str(cfg["openai_api_base"]).startswith(("http://", "https://")):
        problems.append(f"{cfg.get('abbr')}: openai_api_base must be an http(s) URL")
    if key == KVPRESS:
        try:
            PressSpec.of(cfg["kv_press"], str(cfg.get("abbr")))
        except ConfigError as exc:
            problems.append(str(exc))
        if cfg.get("batch_size") != 1:
            problems.append(f"{cfg.get('abbr')}: a KV-cache press compresses one prompt at a time (batch_size 1)")
    return problems


def load_models(default: str, env: str = "NEEDLEBENCH_MODELS") -> list[dict[str, Any]]:
    """Models for an eval config: the files named in ``$<env>`` (comma-separated), else ``default``.

    A relative path is looked up from the current folder, then from the folder of the config file that
    calls this (so ``models/...`` in a config finds the ``models/`` folder beside it, wherever the config
    and its models live: a checkout, an installed package or a user's own folder). A model without a
    ``max_seq_len`` gets :data:`DEFAULT_MAX_SEQ_LEN` with a warning.

    Args:
        default: the model config file used when the variable is unset or empty.
        env: the environment variable that names the model files.

    Returns:
        The ``models`` entries of every file, as plain dicts with ``type`` as a string.

    Raises:
        ConfigError: a file is missing, defines no ``models`` or holds a model :func:`check_model` rejects.
    """
    names = [x.strip() for x in os.environ.get(env, "").split(",") if x.strip()] or [default]
    # the calling config's folder: mmengine runs a config under its own file name
    caller = Path(sys._getframe(1).f_code.co_filename).resolve().parent
    models: list[dict[str, Any]] = []
    for name in names:
        path = next((p for p in (Path(name), caller / name) if p.is_file()), None)
        if path is None:
            raise ConfigError(f"{env}: model config {name!r} not found (looked in {Path.cwd()} and {caller})")
        cfg = Config.fromfile(str(path))
        if "models" not in cfg:
            raise ConfigError(f"{env}: {path} defines no `models` list")
        for m in cfg["models"]:
            m = m.to_dict() if hasattr(m, "to_dict") else dict(m)
            t = m.get("type")
            if not isinstance(t, str):  # a class or mmengine lazy object from an OpenCompass-style file
                m["type"] = str(t) if type(t).__name__.startswith("Lazy") else type_name(t)
            problems = check_model(m)
            if problems:
                raise ConfigError(f"{path}: " + "; ".join(problems))
            if not m.get("max_seq_len"):
                warnings.warn(
                    f"{path}: model {m.get('abbr')} has no max_seq_len; using {DEFAULT_MAX_SEQ_LEN}. "
                    "Set it so prompts that do not fit are shortened or skipped, not truncated.",
                    stacklevel=2,
                )
                m["max_seq_len"] = DEFAULT_MAX_SEQ_LEN
            models.append(m)
    return models
