"""Model config builders for the backends NeedleBench users run.

Each returns a plain OpenCompass model dict (types as dotted strings), with the fields long-context runs need: a
long ``max_seq_len``, an output budget, tensor parallelism, prefix caching and optional RoPE scaling; ``sweep`` makes
one model per value of an axis, each a variant the plan records. ``check_model`` and ``load_models``
(``model_files``) check a dict and read model files without importing the engine.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ConfigError, checked_keywords
from ..methods.kv_press import AWARE_ONLY, QUERY_MODES, PressSpec, check_press
from ..placement import (
    API,
    BACKENDS,
    HF,
    KVPRESS,
    LMDEPLOY,
    NO_INPROC_BUDGET,
    THINKING_FIELDS,
    VLLM,
    engine_of,
    place_budget,
    place_rope,
    place_sampling,
)
from ..planning.variants import VARIANT_KEY, stamp, variant_abbr
from ..planning.variants import axis as variant_axis
from .api_options import API_OPTIONS, ApiOptions
from .model_files import check_model, load_models
from .signatures import class_params
from .smollm2 import smollm2_folder, smollm2_gguf

__all__ = [
    "smollm2_gguf",
    "smollm2_folder",
    "smollm2_model",
    "hf_model",
    "vllm_model",
    "lmdeploy_model",
    "api_model",
    "reasoning",
    "with_sampling",
    "rope_scaling",
    "rope_sweep",
    "with_rope",
    "check_model",
    "load_models",
    "BACKENDS",
    "THINKING_FIELDS",
    "thinking_sweep",
    "kvpress_model",
    "kvpress_sweep",
    "sweep",
]

KEEP_UNANSWERED = "needlebench.opencompass.api.keep_unanswered"  # by dotted name, as OpenCompass looks it up
# OpenCompass's think strip, which its reasoning-model configs attach (a plain config cannot dump a function)
EXTRACT_NON_REASONING = "opencompass.utils.text_postprocessors.extract_non_reasoning_content"
# The meta template API models get: a dataset's turns as chat messages, generation starting at the BOT turn,
# instead of every turn joined into one text as for a base model (where an answer turn adds "\n\n"). A system
# turn falls back to HUMAN and joins the prompt with a newline, as the one text did: the bytes stay as before.
CHAT_META_TEMPLATE = dict(round=[dict(role="HUMAN", api_role="HUMAN"), dict(role="BOT", api_role="BOT", generate=True)])


@checked_keywords()
def smollm2_model(abbr: str = "smollm2", max_seq_len: int = 8192, max_out_len: int = 24) -> dict[str, Any]:
    """The bundled SmolLM2-135M-Instruct through OpenCompass's HuggingFace model on the CPU, greedy: the model
    the tests and benches sweep (context extension, KV-cache presses).

    Args:
        abbr: the model's name in results.
        max_seq_len: its context in tokens (its own window is 8,192).
        max_out_len: the output budget in tokens.
    """
    return hf_model(
        abbr,
        smollm2_folder(),
        max_seq_len=max_seq_len,
        max_out_len=max_out_len,
        num_gpus=0,
        model_kwargs=dict(torch_dtype="float32", device_map="cpu"),
        pad_token_id=2,
        stop_words=["<|im_end|>"],
        generation_kwargs=dict(do_sample=False),
    )


@checked_keywords()
def rope_scaling(kind: str, factor: float, original_max_position_embeddings: int | None = None) -> dict[str, Any]:
    """A RoPE scaling block for a model's config.

    ``linear`` with factor 0.5 / 0.25 is NeedleChain's RoPE contraction (rotation angles 2x / 4x larger);
    ``yarn`` / ``dynamic`` extend the context.

    Args:
        kind: ``"linear"``, ``"yarn"`` or ``"dynamic"``.
        factor: the scaling factor, positive.
        original_max_position_embeddings: the model's trained context, where the scaling needs it.

    Raises:
        ConfigError: an unknown kind, a factor that is not positive, or a ``yarn`` or ``dynamic`` factor below 1.
    """
    if kind not in ("linear", "yarn", "dynamic"):
        raise ConfigError(f"rope_scaling: unknown kind {kind!r}; choose from ('linear', 'yarn', 'dynamic')")
    if factor <= 0:
        raise ConfigError(f"rope_scaling: factor {factor} must be positive")
    if kind != "linear" and factor < 1:  # only a linear block contracts (NeedleChain's factors 0.5 and 0.25)
        raise ConfigError(f"rope_scaling: a {kind} factor {factor} is below 1; {kind} scaling only extends a window")
    out: dict[str, Any] = {"rope_type": kind, "type": kind, "factor": float(factor)}
    if original_max_position_embeddings:
        out["original_max_position_embeddings"] = int(original_max_position_embeddings)
    return out


@checked_keywords(lambda: _takes(HF))
def hf_model(
    abbr: str,
    path: str,
    max_seq_len: int,
    max_out_len: int = 1024,
    batch_size: int = 1,
    num_gpus: int = 1,
    rope: dict | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """OpenCompass's HuggingFace chat-template model.

    Args:
        abbr: the model's name in results.
        path: HuggingFace model id or local folder.
        max_seq_len: the model's context in tokens (prompt plus output).
        max_out_len: the output budget in tokens.
        batch_size: prompts per batch.
        num_gpus: GPUs the model is spread over.
        rope: a :func:`rope_scaling` block, placed where the engine reads it (:mod:`needlebench.placement`).
        kwargs: further arguments of the model class or OpenCompass's model config (checked).

    Raises:
        ConfigError: an argument the model class does not take.
    """
    model_kwargs = dict(kwargs.pop("model_kwargs", {}) or {})
    cfg = dict(
        type=HF,
        abbr=abbr,
        path=path,
        max_seq_len=max_seq_len,
        max_out_len=max_out_len,
        batch_size=batch_size,
        model_kwargs=model_kwargs,
        run_cfg=dict(num_gpus=num_gpus),
        **kwargs,
    )
    return place_rope(cfg, rope) if rope else cfg


@checked_keywords(lambda: _takes(HF))
def kvpress_model(
    abbr: str,
    path: str,
    max_seq_len: int,
    press: str = "SnapKVPress",
    compression_ratio: float = 0.5,
    query: str = "agnostic",
    press_kwargs: dict[str, Any] | None = None,
    max_out_len: int = 1024,
    num_gpus: int = 1,
    rope: dict | None = None,
    baseline: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """A HuggingFace model whose prompts are prefilled under a kvpress KV-cache press (one sample at a time).

    The model loads and renders prompts as :func:`hf_model`'s; the press is checked now, before any model
    loads (docs/guide/kv-compression.md has the install step and what the records keep).

    Args:
        abbr: the model's name in results.
        path: HuggingFace model id or local folder.
        max_seq_len: the model's context in tokens (prompt plus output).
        press: the kvpress class name (``SnapKVPress``, ``StreamingLLMPress``, ``KnormPress``, ``FinchPress``...).
        compression_ratio: the share of the compressed tokens' cache removed, in [0, 1); 0 keeps everything.
        query: ``"agnostic"`` (the context compressed before the question is seen; the question prefilled
            uncompressed) or ``"aware"`` (the whole prompt compressed).
        press_kwargs: further arguments of the press (``window_size=32``; a wrapper press's inner press as
            ``press="SnapKVPress"``).
        max_out_len: the output budget in tokens.
        num_gpus: GPUs the model is spread over.
        rope: a :func:`rope_scaling` block (as :func:`hf_model` takes it).
        baseline: the abbr of the run's model this one compresses; None: the run's model of the same config
            without the press, if there is one (:mod:`needlebench.planning.variants`).
        kwargs: further arguments of OpenCompass's HuggingFace model (``model_kwargs``, ``stop_words``...).

    Raises:
        ConfigError: kvpress missing, an unknown press (listing the installed ones), a ratio outside [0, 1),
            a query mode the press does not support, or settings the press does not take.
    """
    spec = PressSpec.of(
        {"press": press, "compression_ratio": compression_ratio, "query": query, "settings": press_kwargs or {}}, abbr
    )
    check_press(spec, abbr)
    out = hf_model(
        abbr, path, max_seq_len, max_out_len=max_out_len, batch_size=1, num_gpus=num_gpus, rope=rope, **kwargs
    )
    out = {**out, "type": KVPRESS, "kv_press": spec.to_dict()}
    return stamp(out, "press", baseline) if baseline else out


@checked_keywords()
def kvpress_sweep(
    model: dict[str, Any],
    presses: list[str] | tuple[str, ...],
    ratios: list[float] | tuple[float, ...],
    queries: list[str] | tuple[str, ...] = ("agnostic",),
    press_kwargs: dict[str, dict[str, Any]] | None = None,
    baseline: bool = True,
) -> list[dict[str, Any]]:
    """The uncompressed model plus one model per press x ratio x query mode, for one run: KV-cache
    compression as an axis (:func:`sweep` over ``"press"``).

    Each is named ``<abbr>@<press>-<ratio>-<query>`` (``smollm2@snapkv-0.50-agnostic``) and recorded in the plan
    as a variant of the model; the baseline keeps the model's abbr, and the report's axis view compares every
    method with it. A query mode a press does not support (FinchPress is query-aware only) is left out for that
    press; a press that supports none of the modes asked is refused.

    Args:
        model: an :func:`hf_model` config (the baseline as it is).
        presses: kvpress class names.
        ratios: compression ratios, each in [0, 1).
        queries: query modes (``"agnostic"``, ``"aware"``).
        press_kwargs: per press name, further arguments of that press.
        baseline: put the uncompressed model first.

    Raises:
        ConfigError: not a HuggingFace model, no press or ratio, a repeated one, or a check of
            :func:`kvpress_model` failing.
    """
    if not presses or not ratios or not queries:
        raise ConfigError("kvpress_sweep: give at least one press, one ratio and one query mode")
    for name, values in (("presses", presses), ("ratios", ratios), ("queries", queries)):
        if len(set(values)) != len(values):
            raise ConfigError(f"kvpress_sweep: {name} {list(values)} repeat a value")
    unknown = sorted(set(queries) - set(QUERY_MODES))
    if unknown:
        raise ConfigError(f"kvpress_sweep: query modes {unknown}; choose from {QUERY_MODES}")
    specs = []
    for press in presses:
        modes = [q for q in queries if q == "aware" or press not in AWARE_ONLY]
        if not modes:
            raise ConfigError(f"kvpress_sweep: {press} supports query='aware' only; add it to queries")
        specs += [
            dict(press=press, compression_ratio=r, query=q, settings=(press_kwargs or {}).get(press) or {})
            for q in modes
            for r in ratios
        ]
    return sweep(model, "press", specs, baseline=baseline)


def _pressed(model: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """``model`` under the press ``spec`` (``PressSpec.to_dict``), built by :func:`kvpress_model`."""
    if engine_of(model) not in (HF, KVPRESS):
        raise ConfigError(f"kvpress_sweep: {model.get('abbr')!r} is not a HuggingFace model (hf_model)")
    kept = ("type", "abbr", "path", "max_seq_len", "max_out_len", "batch_size", "run_cfg", "kv_press", VARIANT_KEY)
    return kvpress_model(
        str(model.get("abbr", "model")),
        str(model["path"]),
        int(model["max_seq_len"]),
        press=spec["press"],
        compression_ratio=spec["compression_ratio"],
        query=spec["query"],
        press_kwargs=spec.get("settings") or None,
        max_out_len=int(model.get("max_out_len", 1024)),
        num_gpus=int((model.get("run_cfg") or {}).get("num_gpus", 1)),
        **{k: v for k, v in model.items() if k not in kept},
    )


def _budgeted(model: dict[str, Any], budget: int) -> dict[str, Any]:
    """``model`` asking its server for a thinking budget of ``budget`` tokens."""
    abbr = model.get("abbr", "model")
    if engine_of(model) == VLLM:
        raise ConfigError(f"thinking_sweep({abbr!r}): {NO_INPROC_BUDGET}")
    if engine_of(model) != API:
        raise ConfigError(f"thinking_sweep({abbr!r}): an api_model config; its server is asked for each budget")
    field_name = str(model.get("thinking_field") or "vllm")
    return {**model, **place_budget(str(abbr), budget, field_name, model.get("extra_body"))}


# How each axis's value is set on a model config (model, value, vLLM's rope key): where a sweep builds its variants
_SET_ON: dict[str, Any] = {
    "press": lambda model, spec, _key: _pressed(model, spec),
    "thinking": lambda model, budget, _key: _budgeted(model, budget),
    "rope": place_rope,
}


@checked_keywords()
def sweep(
    model: dict[str, Any] | list[dict[str, Any]],
    axis: str,
    values: list[Any] | tuple[Any, ...],
    baseline: bool = False,
    rope_key: str = "rope_scaling",
) -> list[dict[str, Any]]:
    """One model per value of an axis, each stamped with what it varies and which model it varies (the plan
    records it; reports take value and baseline from there), and named for it once: ``<abbr>@<setting>``.

    Composable: given a list of models (an earlier sweep's), every one of them is swept; a press over a RoPE-swept
    model varies that swept model.

    Args:
        model: a model config, or a list of them.
        axis: ``"press"`` (values: ``kv_press`` dicts: press, compression_ratio, query, settings),
            ``"thinking"`` (values: thinking budgets in tokens) or ``"rope"`` (values: :func:`rope_scaling` blocks;
            None for the model's own rotation).
        values: the settings, none repeated.
        baseline: put each model as it is before its variants.
        rope_key: the name vLLM reads a RoPE block under (:func:`with_rope`).

    Raises:
        ConfigError: an unknown axis, no value or a repeated one, or a model that cannot take the setting.
    """
    ax = variant_axis(axis)
    out: list[dict[str, Any]] = []
    for one in model if isinstance(model, list) else [model]:
        abbr = str(one.get("abbr", "model"))
        if not values or len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
            raise ConfigError(f"sweep({abbr!r}, {axis!r}): values {list(values)} must be given, none repeated")
        out += [dict(one)] if baseline else []
        for value in values:
            made = stamp(_SET_ON[ax.name](dict(one), value, rope_key), ax.name, abbr)
            made["abbr"] = variant_abbr(abbr, ax.name, ax.read(made))
            out.append(made)
    return out


@checked_keywords(lambda: _takes(VLLM))
def vllm_model(
    abbr: str,
    path: str,
    max_seq_len: int,
    tp: int = 1,
    max_out_len: int = 1024,
    batch_size: int = 32,
    rope: dict | None = None,
    rope_key: str = "rope_scaling",
    gpu_memory_utilization: float = 0.9,
    generation_kwargs: dict | None = None,
    thinking_budget: int | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """vLLM with the model's chat template; prefix caching on (our request order is made for it).

    Args:
        abbr: the model's name in results.
        path: HuggingFace model id or local folder.
        max_seq_len: the model's context in tokens (also vLLM's ``max_model_len``).
        tp: tensor-parallel size (and GPUs requested).
        max_out_len: the output budget in tokens.
        batch_size: prompts per batch.
        rope: a :func:`rope_scaling` block, placed where vLLM reads it (:mod:`needlebench.placement`).
        rope_key: the name vLLM reads ``rope`` under; ``"rope_parameters"`` with vLLM builds on transformers 5.
        gpu_memory_utilization: the share of GPU memory vLLM may take.
        generation_kwargs: sampling settings (default greedy, ``temperature=0``).
        thinking_budget: refused with its reason (:data:`~needlebench.placement.NO_INPROC_BUDGET`): serve the model and use
            :func:`api_model`'s.
        kwargs: further arguments of the model class or OpenCompass's model config (checked);
            ``model_kwargs`` are merged over the engine settings above, and ``rope`` is placed among their
            overrides (the others kept).

    Raises:
        ConfigError: an argument the model class does not take, or a thinking budget.
    """
    if thinking_budget is not None:
        raise ConfigError(f"vllm_model({abbr!r}): thinking_budget={thinking_budget!r}: {NO_INPROC_BUDGET}")
    model_kwargs: dict[str, Any] = dict(
        tensor_parallel_size=tp,
        max_model_len=max_seq_len,
        gpu_memory_utilization=gpu_memory_utilization,
        enable_prefix_caching=True,
    )
    model_kwargs.update(kwargs.pop("model_kwargs", {}) or {})
    cfg = dict(
        type=VLLM,
        abbr=abbr,
        path=path,
        model_kwargs=model_kwargs,
        max_seq_len=max_seq_len,
        max_out_len=max_out_len,
        batch_size=batch_size,
        generation_kwargs=generation_kwargs or dict(temperature=0),
        run_cfg=dict(num_gpus=tp),
        **kwargs,
    )
    return place_rope(cfg, rope, rope_key) if rope else cfg


@checked_keywords(lambda: _takes(LMDEPLOY))
def lmdeploy_model(
    abbr: str,
    path: str,
    max_seq_len: int,
    tp: int = 1,
    max_out_len: int = 1024,
    batch_size: int = 16,
    rope: dict | None = None,
    gen_config: dict | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """LMDeploy TurboMind; ``session_len`` must hold prompt plus output.

    Args:
        abbr: the model's name in results.
        path: HuggingFace model id or local folder.
        max_seq_len: the model's context in tokens (also the engine's ``session_len``).
        tp: tensor-parallel size (and GPUs requested).
        max_out_len: the output budget in tokens.
        batch_size: prompts per batch (also the engine's ``max_batch_size``).
        rope: a dynamic :func:`rope_scaling` block (TurboMind scales dynamically only), placed where the engine
            reads it (:mod:`needlebench.placement`).
        gen_config: sampling settings (default greedy: ``top_k=1``, ``max_new_tokens=max_out_len``).
        kwargs: further arguments of the model class or OpenCompass's model config (checked).

    Raises:
        ConfigError: an argument the model class does not take, a non-dynamic ``rope``, or ``rope`` with
            ``backend="pytorch"`` (:func:`needlebench.placement.place_rope`: that engine would run unscaled).
    """
    engine: dict[str, Any] = dict(session_len=max_seq_len, max_batch_size=batch_size, tp=tp, enable_prefix_caching=True)
    cfg = dict(
        type=LMDEPLOY,
        abbr=abbr,
        path=path,
        engine_config=engine,
        gen_config=gen_config or dict(top_k=1, temperature=1e-6, max_new_tokens=max_out_len),
        max_seq_len=max_seq_len,
        max_out_len=max_out_len,
        batch_size=batch_size,
        run_cfg=dict(num_gpus=tp),
        **kwargs,
    )
    return place_rope(cfg, rope) if rope else cfg


@checked_keywords(lambda: _takes(API) | set(API_OPTIONS))
def api_model(
    abbr: str,
    model: str,
    base_url: str,
    max_seq_len: int,
    max_out_len: int = 1024,
    key: str = "EMPTY",
    batch_size: int = 8,
    tokenizer_path: str | None = None,
    temperature: float = 0.0,
    timeout: int = 3600,
    **kwargs: Any,
) -> dict[str, Any]:
    """Any OpenAI-compatible server (vLLM serve, SGLang, llama.cpp, LMDeploy serve).

    OpenCompass's ``OpenAISDK`` with its retries (``retry`` tries, each with the ``openai`` client's own
    back-off on 429/5xx and connection errors); a request that still fails is recorded as
    ``request_failed`` instead of ending the run.

    Args:
        abbr: the model's name in results.
        model: the model name the server expects.
        base_url: the server's OpenAI API base URL (``http(s)://...``).
        max_seq_len: the model's context in tokens (prompt plus output).
        max_out_len: the output budget in tokens.
        key: the API key, for a server that checks none (``"EMPTY"``) or as OpenCompass takes it (``"ENV"``:
            ``$OPENAI_API_KEY``, read when the model is built). A key written here is kept out of the run folder
            (moved to an environment variable for the run, :mod:`~needlebench.runfolder.keys`), but it
            is still in your config file: prefer ``key_env``.
        batch_size: requests per batch.
        tokenizer_path: a tokenizer OpenCompass counts prompt tokens with, if given.
        temperature: the sampling temperature (0: greedy).
        timeout: seconds per request.
        kwargs: our API options, declared once in :class:`~needlebench.opencompass.api_options.ApiOptions`
            (``key_env``, ``tokenizer_kwargs``, ``retry_passes`` (2), ``retry_waits``, ``max_tokens_in_flight``,
            ``max_requests_in_flight``, ``throttle_patience``, ``thinking_budget``, ``thinking_field``), and further
            arguments of ``OpenAISDK`` or OpenCompass's model config (checked); ``retry`` defaults to 2,
            ``query_per_second`` to 8 and ``meta_template`` to ``CHAT_META_TEMPLATE`` (the model gets a dataset's
            turns as chat messages). A ``pred_postprocessor`` is wrapped so that it never sees a failed request's
            prediction (``api.keep_unanswered``).

    Raises:
        ConfigError: an argument the model class does not take, both ``key`` and ``key_env``, a thinking budget
            that is not a whole number of tokens (0 or more), an unknown ``thinking_field``, or flow limits out of
            range.
    """
    options = ApiOptions.take(kwargs, abbr)
    if options.key_env is not None and key != "EMPTY":
        raise ConfigError(f"api_model({abbr!r}): give key or key_env, not both (key_env names the key's variable)")
    if kwargs.get("pred_postprocessor"):  # it must let a failed request's prediction object through
        kwargs["pred_postprocessor"] = dict(type=KEEP_UNANSWERED, inner=kwargs["pred_postprocessor"])
    written = options.config(abbr, kwargs.get("extra_body"))
    cfg = dict(
        type=API,
        abbr=abbr,
        path=model,
        **({} if options.key_env is not None else dict(key=key)),
        openai_api_base=base_url,
        max_seq_len=max_seq_len,
        max_out_len=max_out_len,
        batch_size=batch_size,
        query_per_second=kwargs.pop("query_per_second", 8),
        temperature=temperature,
        retry=kwargs.pop("retry", 2),
        timeout=timeout,
        run_cfg=dict(num_gpus=0),
        meta_template=kwargs.pop("meta_template", CHAT_META_TEMPLATE),
    )
    cfg = {**cfg, **kwargs, **written}
    if tokenizer_path:
        cfg["tokenizer_path"] = tokenizer_path
    return cfg


@checked_keywords()
def thinking_sweep(model: dict[str, Any], budgets: list[int] | tuple[int, ...]) -> list[dict[str, Any]]:
    """One model per thinking budget, each named for it (``<abbr>@think-<N>``), for one run: the budget as an axis
    (:func:`sweep` over ``"thinking"``).

    Each copy asks its server for its budget as the model's ``thinking_field`` spells it (:func:`api_model`).
    ``needlebench plan`` counts every budget's requests.

    Args:
        model: an :func:`api_model` config.
        budgets: the budgets in tokens, each a whole number, 0 or more, none repeated.

    Raises:
        ConfigError: a model that is not an API model, no budgets, a repeated one, or a bad one (named).
    """
    return sweep(model, "thinking", list(budgets))


# Keys of an OpenCompass model config that belong to OpenCompass's framework, not to the model class.
_FRAMEWORK_KEYS = frozenset(
    {"abbr", "type", "max_out_len", "min_out_len", "batch_size", "run_cfg", "pred_postprocessor", "batch_padding"}
    | {"summarizer_abbr"}  # OpenCompass's build_model_from_cfg pops it too
)


def _takes(kind: str) -> frozenset[str]:
    """What a builder's ``**kwargs`` may hold: OpenCompass's model config keys and the named parameters of model
    class ``kind``, read without building it (no engine imported). A class's ``**kwargs`` add nothing: OpenCompass's
    HuggingFace model only logs them as unused (``huggingface_above_v4_33.py``); our KV-press model passes them on."""
    # ResilientOpenAISDK (ours) takes OpenAISDK's
    params = class_params("opencompass.models", kind.rsplit(".", 1)[-1]) or class_params(
        "opencompass.models", "OpenAISDK"
    )
    assert params is not None, "opencompass.models defines no OpenAISDK"
    return params.named | _FRAMEWORK_KEYS


@checked_keywords()
def reasoning(model: dict[str, Any], max_out_len: int = 32768) -> dict[str, Any]:
    """A copy of ``model`` set up as a reasoning model, as OpenCompass's own reasoning-model configs set one up.

    A large output budget, and OpenCompass's ``extract_non_reasoning_content`` as the model's
    ``pred_postprocessor`` (its eval task applies it to every answer before the evaluator; wrapped in
    ``api.keep_unanswered`` so a failed request's prediction passes through, and an answer a server cut off
    is stripped as its text). So a run scores what OpenCompass scores: the text after the think blocks it
    removes (``<think>...</think>`` pairs, case-sensitive; what follows a lone ``</think>``; an unclosed
    ``<think>`` is kept, answer and all). The clarified reading strips again its own way (tags in any case;
    an unclosed block is no answer). A ``pred_postprocessor`` the model already has is kept.

    Args:
        model: a model config from one of this module's builders.
        max_out_len: the output budget in tokens (for LMDeploy also ``gen_config.max_new_tokens``).
    """
    out = dict(model)
    out["max_out_len"] = max_out_len
    if out["type"] == LMDEPLOY:
        out["gen_config"] = {**out.get("gen_config", {}), "max_new_tokens": max_out_len}
    if not out.get("pred_postprocessor"):
        out["pred_postprocessor"] = dict(type=KEEP_UNANSWERED, inner=dict(type=EXTRACT_NON_REASONING))
    return out


@checked_keywords()
def with_sampling(model: dict[str, Any], temperature: float, top_p: float) -> dict[str, Any]:
    """A copy of ``model`` that samples at (temperature, top_p) on its own backend.

    Each backend takes sampling settings in a different field: vLLM and HuggingFace
    ``generation_kwargs`` (HF also needs ``do_sample``), LMDeploy ``gen_config`` (its greedy
    ``top_k=1`` removed), an OpenAI-compatible API ``temperature`` plus ``openai_extra_kwargs``.

    Args:
        model: a model config from one of this module's builders or an OpenCompass model file.
        temperature: the sampling temperature.
        top_p: nucleus sampling mass.

    Raises:
        ConfigError: the model's type is not one of the supported backends.
    """
    return place_sampling(model, temperature, top_p)


@checked_keywords()
def with_rope(model: dict[str, Any], rope: dict[str, Any] | None, rope_key: str = "rope_scaling") -> dict[str, Any]:
    """A copy of ``model`` whose engine applies ``rope`` (a :func:`rope_scaling` block), in the field that engine
    reads (:func:`needlebench.placement.place_rope`); ``None`` takes any run scaling off.

    Args:
        model: a model config from one of this module's builders or an OpenCompass model file.
        rope: the scaling block, or None.
        rope_key: the name vLLM reads the block under.

    Raises:
        ConfigError: an API model (its server decides the scaling), an unknown model type, LMDeploy's PyTorch
            engine, or a non-dynamic kind for LMDeploy's TurboMind.
    """
    return place_rope(model, rope, rope_key)


@checked_keywords()
def rope_sweep(
    model: dict[str, Any],
    factors: list[float] | tuple[float, ...],
    kind: str = "yarn",
    original_max_position_embeddings: int | None = None,
    rope_key: str = "rope_scaling",
) -> list[dict[str, Any]]:
    """One model per RoPE scaling factor, each named for its setting, for one run: context extension as an axis.

    Factor 1 is the model as its own config has it (no run scaling), named ``<abbr>@rope-x1``; every other is
    ``<abbr>@<kind>-x<factor>`` (``qwen@yarn-x4``). Their ``max_seq_len`` stays the model's: the cells past a
    factor's window are the point of a sweep, so run it with ``runtime(beyond_window="mark")`` (the default
    stops on them, naming them). ``needlebench plan`` counts every factor's requests.

    Args:
        model: a model config from one of this module's builders (HF, vLLM or LMDeploy).
        factors: the factors, e.g. ``(1, 2, 4)``; each at least 1 (a sweep extends).
        kind: ``yarn`` or ``dynamic`` (:func:`rope_scaling`).
        original_max_position_embeddings: the model's trained window, where the scaling needs it.
        rope_key: the name vLLM reads the block under (:func:`with_rope`).

    Raises:
        ConfigError: no factors, one repeated or below 1, or an engine that cannot take the scaling.
    """
    if not factors:
        raise ConfigError("rope_sweep: give at least one factor, e.g. factors=(1, 2, 4)")
    if len(set(factors)) != len(factors) or any(f < 1 for f in factors):
        raise ConfigError(f"rope_sweep: factors {list(factors)} must be different and at least 1")
    blocks = [None if f == 1 else rope_scaling(kind, f, original_max_position_embeddings) for f in factors]
    return sweep(model, "rope", blocks, rope_key=rope_key)
