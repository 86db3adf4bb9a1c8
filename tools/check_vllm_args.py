"""Check a ``vllm_model(...)`` config against the installed vLLM's own ``EngineArgs`` / ``SamplingParams``.

Why: OpenCompass passes ``model_kwargs`` to ``vllm.LLM(**model_kwargs)`` and ``generation_kwargs`` to
``SamplingParams(**generation_kwargs)`` only on the GPU machine, hours into a job; a typo or a key a
newer vLLM renamed fails there. The project's ``.venv`` cannot import vLLM (transformers<5, numpy<2),
so this runs with ``.cache/vllm-venv/bin/python`` and reads the config as JSON on stdin:

    .venv/bin/python -c "..."  # dump the model dict(s) as JSON
    | .cache/vllm-venv/bin/python tools/check_vllm_args.py

Input: one model dict or a list of them. Output: one JSON object per line,
``{"abbr": ..., "problems": [...]}``; exit status 1 when any model has a problem.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
from typing import Any


def engine_arg_names() -> set[str]:
    """Keyword arguments ``vllm.LLM`` forwards to ``EngineArgs`` (a dataclass in every vLLM we know)."""
    from vllm.engine.arg_utils import EngineArgs

    if dataclasses.is_dataclass(EngineArgs):
        return {f.name for f in dataclasses.fields(EngineArgs)}
    return set(inspect.signature(EngineArgs).parameters) - {"self"}


def sampling_param_names() -> set[str]:
    """Public keyword arguments of ``SamplingParams`` (a msgspec struct; private fields are not options)."""
    from vllm import SamplingParams

    return {n for n in inspect.signature(SamplingParams).parameters if not n.startswith("_")}


def rope_override_problems(overrides: dict[str, Any]) -> list[str]:
    """Whether the installed transformers turns the rope keys of ``hf_overrides`` into its rope settings.

    transformers 5 renamed ``rope_scaling`` to ``rope_parameters``; vLLM applies ``hf_overrides`` with
    ``config.update``. The check applies the override to a plain Llama config and looks at the result,
    so it follows whatever aliasing the installed release does instead of guessing it.
    """
    rope_keys = [k for k in ("rope_scaling", "rope_parameters") if k in overrides]
    if not rope_keys:
        return []
    from transformers import LlamaConfig

    problems: list[str] = []
    for key in rope_keys:
        want = overrides[key]
        cfg = LlamaConfig()
        cfg.update({key: want})
        got = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
        kind = want.get("rope_type") or want.get("type")
        if got.get("factor") != want.get("factor") or (kind and got.get("rope_type", got.get("type")) != kind):
            problems.append(
                f"hf_overrides.{key} does not reach the model's rope settings with this transformers "
                f"(got {got}); use the other rope_key"
            )
    return problems


def check(model: dict[str, Any], engine: set[str], sampling: set[str]) -> list[str]:
    """Problems of one model dict (empty list = vLLM accepts every key)."""
    problems: list[str] = []
    mk = model.get("model_kwargs") or {}
    for key in sorted(set(mk) - engine):
        problems.append(f"model_kwargs.{key}: not an EngineArgs field of this vLLM")
    overrides = mk.get("hf_overrides")
    if isinstance(overrides, dict):
        problems += rope_override_problems(overrides)
    gk = model.get("generation_kwargs") or {}
    for key in sorted(set(gk) - sampling):
        problems.append(f"generation_kwargs.{key}: not a SamplingParams argument of this vLLM")
    return problems


def main() -> int:
    """Read JSON from stdin, print one result line per model, exit 1 on any problem."""
    data = json.load(sys.stdin)
    models = data if isinstance(data, list) else [data]
    engine, sampling = engine_arg_names(), sampling_param_names()
    bad = False
    for m in models:
        problems = check(m, engine, sampling)
        bad |= bool(problems)
        print(json.dumps({"abbr": m.get("abbr"), "problems": problems}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
