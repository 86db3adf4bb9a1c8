"""Our vLLM / LMDeploy builders' arguments against the engine releases the ``[vllm]`` / ``[lmdeploy]`` extras install.

GPU users get vLLM 0.14.0 and LMDeploy 0.18.0 from the extras; neither GPU build runs here (LMDeploy has no
CPU engine; ``tests/test_vllm_inproc.py`` runs vLLM 0.14.0's CPU build in-process). What can
go wrong before the first token on a GPU machine is a key the engine does not take: vLLM raises (hours into
a queued job), OpenCompass's LMDeploy wrapper silently drops it (a RoPE factor or session length that never
arrives). ``tools/engine_signatures.py`` reads the option names from the very wheel pip picks for each extra
(vLLM 0.14.0 ``EngineArgs`` / ``LLM`` / ``SamplingParams``; LMDeploy 0.18.x ``TurbomindEngineConfig`` /
``PytorchEngineConfig`` / ``GenerationConfig``) without installing it; these tests hold every shipped model
config and builder variant (RoPE, NeedleChain sampling, ``reasoning()``) against them, together with the
keys OpenCompass 0.5.4 itself adds.

Network: one pip metadata look-up per engine plus a few MB of range reads the first time (cached in
``.cache/engine-signatures/``); marker ``resolver``.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from functools import cache
from typing import Any

import pytest
from conftest import ROOT
from mmengine.config import Config

from needlebench.errors import ConfigError
from needlebench.opencompass.models import (
    lmdeploy_model,
    reasoning,
    rope_scaling,
    vllm_model,
    with_sampling,
)
from needlebench.tasks.needlechain.task import NEEDLECHAIN_SAMPLING

pytestmark = pytest.mark.resolver

# keys OpenCompass 0.5.4 adds on its own (models/vllm_with_tf_above_v4_33.py, turbomind_with_tf_above_v4_33.py)
OC_VLLM_MODEL_KWARGS = {"trust_remote_code": True}
OC_VLLM_GENERATION = {"temperature": 0, "max_tokens": 1, "stop": []}
OC_LMDEPLOY_ENGINE = {"session_len": 1}
OC_LMDEPLOY_GEN = {"max_new_tokens": 1, "min_new_tokens": 1, "stop_words": [], "do_sample": False, "top_k": 1}


@cache
def engine(package: str) -> dict[str, Any]:
    """``tools/engine_signatures.py``'s JSON for ``package`` (option names per class, version, wheel)."""
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "engine_signatures.py"), package],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    out["names"] = {k: set(v) for k, v in out["names"].items()}
    return out


def _check_vllm_args():  # noqa: ANN202 - the module object
    """``tools/check_vllm_args.py`` as a module (its ``check`` compares a model dict with name sets)."""
    spec = importlib.util.spec_from_file_location("check_vllm_args", ROOT / "tools" / "check_vllm_args.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _shipped(prefix: str) -> list[dict[str, Any]]:
    models = []
    for path in sorted((ROOT / "configs" / "models").glob(f"{prefix}_*.py")):
        models += [m.to_dict() if hasattr(m, "to_dict") else dict(m) for m in Config.fromfile(str(path))["models"]]
    assert models, prefix
    return models


def _vllm_variants() -> list[dict[str, Any]]:
    base = vllm_model(
        "v-128k", "/m", 131072, tp=2, rope=rope_scaling("yarn", 4.0, original_max_position_embeddings=32768)
    )
    return [
        *_shipped("vllm"),
        base,
        with_sampling(base, **NEEDLECHAIN_SAMPLING),  # configs/eval_needlechain.py
        reasoning(with_sampling(vllm_model("r", "/m", 131072), **NEEDLECHAIN_SAMPLING)),
        vllm_model("v-1m", "/m", 1010000, tp=4, model_kwargs=dict(enable_chunked_prefill=True)),
    ]


def _lmdeploy_variants() -> list[dict[str, Any]]:
    long = lmdeploy_model("l-1m", "/m", 1010000, tp=4, rope=rope_scaling("dynamic", 4.0))
    return [
        *_shipped("lmdeploy"),
        long,
        with_sampling(long, **NEEDLECHAIN_SAMPLING),
        reasoning(with_sampling(lmdeploy_model("r", "/m", 131072), **NEEDLECHAIN_SAMPLING)),
        lmdeploy_model("p", "/m", 32768, backend="pytorch"),
    ]


def lmdeploy_problems(model: dict[str, Any], names: dict[str, set[str]]) -> list[str]:
    """Keys of an LMDeploy model config (plus OpenCompass's own) that LMDeploy's config classes lack.

    Args:
        model: a ``lmdeploy_model`` config.
        names: option names per class, from ``tools/engine_signatures.py``.
    """
    backend = model.get("backend", "turbomind")
    engine_cls = "TurbomindEngineConfig" if backend == "turbomind" else "PytorchEngineConfig"
    problems = [
        f"engine_config.{k}: not a {engine_cls} field"
        for k in sorted({**OC_LMDEPLOY_ENGINE, **model["engine_config"]}.keys() - names[engine_cls])
    ]
    problems += [
        f"gen_config.{k}: not a GenerationConfig field"
        for k in sorted({**OC_LMDEPLOY_GEN, **model["gen_config"]}.keys() - names["GenerationConfig"])
    ]
    return problems


def test_the_signatures_come_from_the_releases_the_extras_install() -> None:
    """The wheels read are the extras' picks (docs/guide/install.md's table and tests/test_extras.py), and hold what we check."""
    vllm, lmd = engine("vllm"), engine("lmdeploy")
    assert vllm["version"] == "0.14.0" and vllm["wheel"].startswith("vllm-")
    assert lmd["version"].startswith("0.18.") and lmd["wheel"].startswith("lmdeploy-")
    # the parse found the classes, not an empty shell
    assert {"max_model_len", "enable_prefix_caching", "hf_overrides"} <= vllm["names"]["EngineArgs"]
    assert {"temperature", "top_p", "max_tokens", "stop"} <= vllm["names"]["SamplingParams"]
    assert {"session_len", "rope_scaling_factor", "tp"} <= lmd["names"]["TurbomindEngineConfig"]
    assert "rope_scaling_factor" not in lmd["names"]["PytorchEngineConfig"]


@pytest.mark.parametrize("model", _vllm_variants(), ids=lambda m: m["abbr"])
def test_vllm_builder_arguments_are_vllm_014_options(model: dict[str, Any]) -> None:
    """``vllm.LLM(path, **model_kwargs)`` and ``SamplingParams(**generation_kwargs)`` accept every key we pass.

    The RoPE override is applied to a Llama config of the installed transformers (4.57, what vLLM 0.14.0
    resolves to under transformers<5), as ``tools/check_vllm_args.py`` does with the server venv.
    """
    names = engine("vllm")["names"]
    engine_keys = names["EngineArgs"] | names["LLM.__init__"]
    full = {
        **model,
        "model_kwargs": {**OC_VLLM_MODEL_KWARGS, **model["model_kwargs"]},
        "generation_kwargs": {**OC_VLLM_GENERATION, **model["generation_kwargs"]},
    }
    assert _check_vllm_args().check(full, engine_keys, names["SamplingParams"]) == []


def test_vllm_check_catches_a_renamed_option() -> None:
    names = engine("vllm")["names"]
    bad = vllm_model("typo", "/m", 8192, model_kwargs=dict(enable_prefix_cachng=True), generation_kwargs=dict(top_pp=1))
    assert _check_vllm_args().check(bad, names["EngineArgs"] | names["LLM.__init__"], names["SamplingParams"]) == [
        "model_kwargs.enable_prefix_cachng: not an EngineArgs field of this vLLM",
        "generation_kwargs.top_pp: not a SamplingParams argument of this vLLM",
    ]


@pytest.mark.parametrize("model", _lmdeploy_variants(), ids=lambda m: m["abbr"])
def test_lmdeploy_builder_arguments_are_lmdeploy_018_options(model: dict[str, Any]) -> None:
    """engine_config (session length, RoPE factor) and gen_config reach LMDeploy instead of being filtered out.

    OpenCompass 0.5.4 keeps only the keys the config class has (``hasattr``), so a key missing here would be
    dropped without a word: the session would fall back to OpenCompass's default and a 1M model would run
    without its RoPE factor.
    """
    assert lmdeploy_problems(model, engine("lmdeploy")["names"]) == []
    ec = model["engine_config"]
    assert ec["session_len"] >= model["max_seq_len"] and model["gen_config"]["max_new_tokens"] == model["max_out_len"]


def test_lmdeploy_check_catches_what_opencompass_would_drop() -> None:
    names = engine("lmdeploy")["names"]
    bad = lmdeploy_model("x", "/m", 8192, gen_config=dict(max_new_tokens=1024, top_k=1, temprature=0.6))
    bad["engine_config"]["rope_scaling"] = 4.0
    assert lmdeploy_problems(bad, names) == [
        "engine_config.rope_scaling: not a TurbomindEngineConfig field",
        "gen_config.temprature: not a GenerationConfig field",
    ]
    # the PyTorch engine has no RoPE factor: the builder refuses instead of letting OpenCompass drop it
    with pytest.raises(ConfigError, match="TurboMind backend only"):
        lmdeploy_model("p", "/m", 1010000, backend="pytorch", rope=rope_scaling("dynamic", 4.0))
    forced = lmdeploy_model("p", "/m", 1010000, rope=rope_scaling("dynamic", 4.0)) | {"backend": "pytorch"}
    assert lmdeploy_problems(forced, names) == ["engine_config.rope_scaling_factor: not a PytorchEngineConfig field"]
