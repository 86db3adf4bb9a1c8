"""Every config loads and builds; model configs are valid without their engines; the API path runs for real."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import free_port, run_opencompass, wait_healthy
from mmengine.config import Config

from needlebench.errors import ConfigError
from needlebench.opencompass.models import check_model, load_models, rope_scaling
from needlebench.tasks import config_params, get_task, make_params

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted(p for p in (ROOT / "configs").rglob("*.py"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_config_loads_and_builds_first_samples(path: Path) -> None:
    cfg = Config.fromfile(str(path))
    assert cfg.get("models") or cfg.get("datasets"), path
    for model in cfg.get("models", []):
        assert check_model(model) == [], (path, check_model(model))
    for d in cfg.get("datasets", []):
        assert str(d["type"]).endswith("NeedleBenchDataset")
        params = make_params(d["task"], **config_params(d))
        first = list(itertools.islice(get_task(d["task"]).generate(params), 2))
        assert first and all(s.prompt for s in first), d["abbr"]
    if path.name.startswith("eval_"):
        assert cfg["summarizer"]["type"].endswith("NeedleBenchSummarizer")
        assert cfg["infer"]["partitioner"]["type"].endswith("NeedleBenchPartitioner")


def test_suite_configs_cover_every_suite_and_family() -> None:
    names = {p.name for p in CONFIGS}
    for suite in ("4k", "8k", "32k", "128k", "200k", "256k", "1000k"):
        assert f"eval_needlebench_{suite}.py" in names
    assert {"eval_atc.py", "eval_needlechain.py"} <= names
    cfg = Config.fromfile(str(ROOT / "configs" / "eval_needlebench_1000k.py"))
    srt = next(d for d in cfg.datasets if d["task"] == "srt" and d["lang"] == "en")
    assert srt["lengths"][-1] == 1_000_000 and srt["repeats"] == 10 and len(srt["depths"]) == 11
    assert {(d["task"], d["lang"]) for d in cfg.datasets} == {
        (t, lang) for t in ("srt", "mrt", "mrs") for lang in ("en", "zh")
    }


def test_engine_configs_are_checked_without_engines() -> None:
    vllm = Config.fromfile(str(ROOT / "configs/models/vllm_qwen2_5_7b_instruct_128k.py")).models[0]
    assert vllm["model_kwargs"]["tensor_parallel_size"] == vllm["run_cfg"]["num_gpus"] == 2
    assert vllm["model_kwargs"]["max_model_len"] == vllm["max_seq_len"] == 131072
    assert vllm["model_kwargs"]["enable_prefix_caching"] is True
    assert vllm["model_kwargs"]["hf_overrides"]["rope_scaling"]["rope_type"] == "yarn"
    lmd = Config.fromfile(str(ROOT / "configs/models/lmdeploy_qwen2_5_7b_instruct_128k.py")).models[0]
    assert lmd["engine_config"]["session_len"] == lmd["max_seq_len"]
    assert lmd["gen_config"]["max_new_tokens"] == lmd["max_out_len"]
    r1 = Config.fromfile(str(ROOT / "configs/models/vllm_deepseek_r1_distill_qwen_7b.py")).models[0]
    assert r1["max_out_len"] == 32768
    bad = dict(vllm, model_kwargs=dict(vllm["model_kwargs"], max_model_len=4096))
    assert any("max_model_len" in p for p in check_model(bad))
    assert any("unknown model type" in p for p in check_model({"type": "my.Model"}))
    assert rope_scaling("linear", 0.5)["factor"] == 0.5  # NeedleChain's RoPE contraction
    with pytest.raises(ConfigError):
        rope_scaling("ntk", 2)
    with pytest.raises(ConfigError, match="NEEDLEBENCH_MODELS"):
        os.environ["NEEDLEBENCH_MODELS"] = "models/none.py"
        try:
            load_models(default="models/smollm2_135m_cpu.py")
        finally:
            del os.environ["NEEDLEBENCH_MODELS"]


@pytest.mark.e2e
def test_api_config_runs_against_a_local_openai_server(tmp_path: Path) -> None:
    from needlebench.record import finish_reason, prediction_text

    port = free_port()
    log = tmp_path / "requests.jsonl"
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tools" / "serve_openai.py"), "--port", str(port), "--request-log", str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_healthy(port, server)
        env = dict(
            os.environ,
            NEEDLEBENCH_API_BASE=f"http://127.0.0.1:{port}/v1",
            NEEDLEBENCH_API_MODEL="smollm2-135m-instruct",
            NEEDLEBENCH_API_MAX_SEQ_LEN="8192",
            NEEDLEBENCH_API_MAX_OUT_LEN="24",
        )
        run = run_opencompass("tests/configs/e2e_api.py", tmp_path, env=env)
    finally:
        server.terminate()
        server.wait(timeout=30)
    samples = [
        json.loads(x)
        for x in (run / "results" / "api-model" / "needlebench_srt_en_4k.samples.jsonl").read_text().splitlines()
    ]
    assert len(samples) == 2
    preds = json.loads((run / "predictions" / "api-model" / "needlebench_srt_en_4k.json").read_text())
    # a 24-token budget may cut an answer: it is saved with the server's finish reason, its text kept
    saved = [preds[key]["prediction"] for key in sorted(preds, key=int)]
    assert all(str(prediction_text(p)).strip() for p in saved)
    assert [s["truncated"] for s in samples] == [finish_reason(p) == "length" for p in saved]
    assert (run / "summary" / "needlebench_summary.csv").exists()
    chain = (run / "results" / "api-model" / "needlechain.samples.jsonl").read_text().splitlines()
    assert len(chain) == 1
    requests = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(requests) == 3 and all(r["temperature"] == 0.6 and r["top_p"] == 0.95 for r in requests)


def test_sampling_reaches_every_backend() -> None:
    """NeedleChain's temperature 0.6 / top-p 0.95 in the field each backend reads."""
    from needlebench.opencompass.models import (
        api_model,
        hf_model,
        lmdeploy_model,
        vllm_model,
        with_sampling,
    )
    from needlebench.tasks.needlechain.task import NEEDLECHAIN_SAMPLING

    vllm = with_sampling(vllm_model("v", "/m", 8192), **NEEDLECHAIN_SAMPLING)
    assert vllm["generation_kwargs"] == {"temperature": 0.6, "top_p": 0.95}
    hf = with_sampling(hf_model("h", "/m", 8192), **NEEDLECHAIN_SAMPLING)
    assert hf["generation_kwargs"] == {"do_sample": True, "temperature": 0.6, "top_p": 0.95}
    lmd = with_sampling(lmdeploy_model("l", "/m", 8192), **NEEDLECHAIN_SAMPLING)
    assert lmd["gen_config"]["temperature"] == 0.6 and lmd["gen_config"]["top_p"] == 0.95
    assert "top_k" not in lmd["gen_config"]  # the greedy default would override sampling
    api = with_sampling(api_model("a", "m", "http://127.0.0.1:1/v1", 8192), **NEEDLECHAIN_SAMPLING)
    assert api["temperature"] == 0.6 and api["openai_extra_kwargs"] == {"top_p": 0.95}
    assert "generation_kwargs" not in api  # OpenAISDK has no such argument
    for m in (vllm, hf, lmd, api):
        assert check_model(m) == []
    with pytest.raises(ConfigError, match="unknown model type"):
        with_sampling({"type": "my.Model"}, **NEEDLECHAIN_SAMPLING)


def test_check_model_explains_missing_fields_without_crashing() -> None:
    from needlebench.opencompass.models import LMDEPLOY, VLLM

    assert any(
        "model_kwargs" in p
        for p in check_model({"type": VLLM, "abbr": "v", "path": "/m", "max_out_len": 1, "batch_size": 1})
    )
    problems = check_model({"type": LMDEPLOY, "abbr": "l", "path": "/m", "max_out_len": 1, "batch_size": 1})
    assert any("engine_config" in p for p in problems) and any("gen_config" in p for p in problems)
