"""The context window a model really has, checked before any model call (``planning.window``).

The window read from hand-made ``config.json`` files as each engine builder scales it; the bundled SmolLM2
(8,192-token native window) planned at 4k-32k, with and without YaRN x2; and real OpenCompass runs of a
counting oracle whose folder gives a 3,000-token window: stopped before any call by default, run and marked
in the summary with ``runtime(beyond_window="mark")``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, bin_path

from needlebench.errors import ConfigError
from needlebench.opencompass.models import hf_model, lmdeploy_model, rope_scaling, vllm_model
from needlebench.planning.settings import RunSettings
from needlebench.planning.window import check_windows, kv_cache_bytes, read_window


def _model_folder(folder: Path, **config: object) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", **config}), encoding="utf-8")
    return str(folder)


def test_the_window_is_read_from_the_config_as_each_engine_scales_it(tmp_path: Path) -> None:
    plain = _model_folder(tmp_path / "plain", max_position_embeddings=32768)
    yarn = rope_scaling("yarn", 4, 32768)
    for model in (
        hf_model("m", plain, max_seq_len=131072, rope=yarn),
        vllm_model("m", plain, max_seq_len=131072, rope=yarn),
        vllm_model("m", plain, max_seq_len=131072, rope=yarn, rope_key="rope_parameters"),
    ):
        w = read_window(model)
        assert (w.native, w.usable, w.sliding) == (32768, 131072, None)
        assert w.scaling == {"kind": "yarn", "factor": 4.0, "original": 32768, "by": "run"}
        assert w.describe() == "scaled window 131,072: yarn x4 of 32,768, the run's"
    w = read_window(lmdeploy_model("m", plain, max_seq_len=131072, rope=rope_scaling("dynamic", 2.0)))
    assert (w.native, w.usable, w.scaling["kind"]) == (32768, 65536, "dynamic")
    w = read_window(hf_model("m", plain, max_seq_len=131072))
    assert (w.native, w.usable, w.limit, w.scaling) == (32768, 32768, 32768, None)
    assert w.describe() == "native window 32,768, no RoPE scaling"
    # NeedleChain's contraction: linear 0.5 halves the window
    assert read_window(hf_model("m", plain, max_seq_len=8192, rope=rope_scaling("linear", 0.5))).usable == 16384
    # a model whose own config scales (trained at 32k, stretched to 128k): the larger of the two
    own = _model_folder(
        tmp_path / "own",
        max_position_embeddings=131072,
        rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
    )
    w = read_window(hf_model("m", own, max_seq_len=131072))
    assert (w.native, w.usable, w.scaling["by"]) == (32768, 131072, "model")
    # the run's scaling replaces the model's block whole: without an original of its own it stretches
    # max_position_embeddings, as transformers and LMDeploy do; with one, that one
    w = read_window(hf_model("m", own, max_seq_len=65536, rope=rope_scaling("yarn", 2)))
    assert (w.native, w.usable, w.scaling["by"]) == (32768, 262144, "run")
    w = read_window(hf_model("m", own, max_seq_len=65536, rope=rope_scaling("yarn", 2, 32768)))
    assert (w.native, w.usable) == (32768, 65536)
    # a sliding window counts only where every layer slides
    for config, sliding in (
        ({"sliding_window": 4096}, 4096),  # Mistral 7B v0.1
        ({"sliding_window": 4096, "use_sliding_window": False}, None),  # Qwen2
        ({"sliding_window": 1024, "layer_types": ["sliding_attention", "full_attention"]}, None),  # Gemma 3
    ):
        folder = _model_folder(tmp_path / f"s{sliding}{len(config)}", max_position_embeddings=32768, **config)
        w = read_window(hf_model("m", folder, max_seq_len=32768))
        assert w.sliding == sliding and w.limit == (sliding or 32768), config
    # nothing to read: an API model, a scripted model, a hub name not in the local cache
    assert read_window({"abbr": "api", "path": "gpt-4o", "openai_api_base": "http://127.0.0.1:1/v1"}) is None
    assert read_window({"abbr": "oracle", "path": "oracle"}) is None
    assert read_window({"abbr": "hub", "path": "nobody-here/no-such-model-7b"}) is None


def test_bad_settings_are_one_line() -> None:
    from needlebench.opencompass.configs import runtime

    for call in (
        lambda: runtime(beyond_window="maybe"),
        lambda: RunSettings.of({"beyond_window": "ignore"}),
        lambda: rope_scaling("yarn", 0.5),
        lambda: rope_scaling("dynamic", 0.9),
    ):
        with pytest.raises(ConfigError) as err:
            call()
        assert "\n" not in str(err.value)
    assert rope_scaling("linear", 0.25)["factor"] == 0.25  # contraction stays valid


SMOLLM2 = """_base_ = []
from needlebench.opencompass.configs import SUMMARIZER, needlebench_datasets
from needlebench.opencompass.models import hf_model, rope_scaling, smollm2_folder
models = [hf_model("smollm2", smollm2_folder(), max_seq_len=40000, max_out_len=32, num_gpus=0, rope={rope})]
datasets = needlebench_datasets(suite="32k", tasks=["srt"], langs=["en"], lengths=[4000, 16000, 32000], depths=[0, 50],
                                repeats=1)
summarizer = dict(type=SUMMARIZER)
"""


def test_the_kv_cache_of_a_token_is_read_from_the_config(tmp_path: Path) -> None:
    """Qwen2.5-7B's shape (28 layers, 4 KV heads of 128 = 3,584 / 28, bfloat16): 57,344 bytes a token, 53.4 GiB
    at 1M; where the config does not say its shape, nothing is guessed."""
    qwen = _model_folder(
        tmp_path / "qwen",
        max_position_embeddings=32768,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        hidden_size=3584,
        torch_dtype="bfloat16",
    )
    per_token, how = kv_cache_bytes({"path": qwen})
    assert per_token == 57344 and round(per_token * 1_000_000 / 2**30, 1) == 53.4 and "28 layers x 4 KV heads" in how
    assert kv_cache_bytes({"path": _model_folder(tmp_path / "bare", max_position_embeddings=4096)}) is None
    # MLA (DeepSeek-V3's shape): one latent of 512 + 64 per layer, not K and V per head
    mla = _model_folder(
        tmp_path / "mla",
        max_position_embeddings=163840,
        num_hidden_layers=61,
        num_attention_heads=128,
        num_key_value_heads=128,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        torch_dtype="bfloat16",
    )
    assert kv_cache_bytes({"path": mla})[0] == 576 * 61 * 2
    # some layers slide (Gemma 3): the full-attention count is an upper bound, and says so
    gemma = _model_folder(
        tmp_path / "gemma",
        max_position_embeddings=131072,
        num_hidden_layers=34,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=256,
        sliding_window=1024,
        layer_types=["sliding_attention"] * 34,
    )
    assert "an upper bound" in kv_cache_bytes({"path": gemma})[1]
    assert kv_cache_bytes({"path": "gpt-x", "openai_api_base": "http://127.0.0.1:9/v1"}) is None


def test_smollm2_past_its_8k_window_is_named_and_yarn_x2_takes_16k_but_not_32k(tmp_path: Path) -> None:
    """SmolLM2-135M's config.json says 8,192 positions: its English 16k and 32k cells are past it; under YaRN
    x2 of 8,192 (16,384) the 16k cell fits (its longest prompt, in SmolLM2's tokens, with the output) and 32k
    does not."""
    from needlebench.commands.plan import format_plan, plan_config

    past, said = {}, {}
    for name, rope in (("native", "None"), ("yarn", 'rope_scaling("yarn", 2, 8192)')):
        config = tmp_path / f"{name}.py"
        config.write_text(SMOLLM2.format(rope=rope), encoding="utf-8")
        report = plan_config(str(config))
        (model,) = report.run.models
        (entry,) = model.beyond_window.values()
        past[name] = [c[0] for c in entry["cells"]]
        assert all(c[2] > entry["limit"] for c in entry["cells"]) and entry["limit"] == model.window["usable"]
        with pytest.raises(ConfigError) as err:
            check_windows(report.run.models, "stop")
        said[name] = str(err.value)
        assert said[name].startswith("context window: smollm2: ") and "beyond_window='mark'" in said[name]
        assert "past the window" in format_plan(report)
        check_windows(report.run.models, "mark")  # accepted: the cells run, marked
    assert past == {"native": [16000, 32000], "yarn": [32000]}
    # before any model loads: the KV cache one sequence of its longest prompt takes (SmolLM2: float32)
    per_token, how = kv_cache_bytes({"path": report.run.models[0].window["source"].removesuffix("/config.json")})
    assert per_token == 2 * 30 * 3 * 64 * 4 and "30 layers x 3 KV heads x 64 x 4 bytes" in how
    line = next(x for x in format_plan(report).splitlines() if "KV cache of one sequence" in x)
    longest = float(re.search(r"longest prompt and its output \(([\d,]+) model tokens\)", line)[1].replace(",", ""))
    assert f"{per_token * longest / 2**30:,.1f} GiB" in line and longest > 16000  # the 32k cell
    assert "smollm2: native window 8,192, no RoPE scaling; past it: " in said["native"]
    assert "smollm2: scaled window 16,384: yarn x2 of 8,192, the run's; past it: " in said["yarn"]


def _run(work: Path, calls: Path, model: str, beyond: str | None = None) -> subprocess.CompletedProcess:
    path = os.pathsep.join(filter(None, [str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {
        **os.environ,
        "PYTHONPATH": path,
        "NEEDLEBENCH_TEST_CALLS": str(calls),
        "NEEDLEBENCH_TEST_WINDOW_MODEL": model,
    }
    if beyond:
        env["NEEDLEBENCH_TEST_BEYOND"] = beyond
    return subprocess.run(
        [bin_path("needlebench"), "run", "tests/configs/e2e_window.py", "-w", str(work)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.e2e
def test_a_run_past_the_window_stops_before_any_call_and_with_mark_runs_them_marked(tmp_path: Path) -> None:
    model = _model_folder(tmp_path / "model", max_position_embeddings=3000)
    calls = tmp_path / "calls.txt"
    stopped = _run(tmp_path / "stopped", calls, model)
    lines = [x for x in stopped.stderr.splitlines() if x.startswith("needlebench: ")]
    assert stopped.returncode != 0 and len(lines) == 1, stopped.stderr[-3000:]
    assert "windowed: native window 3,000, no RoPE scaling; past it: needlebench_srt_en_4k (4000: up to " in lines[0]
    assert not calls.exists() or calls.read_text() == ""  # no model was asked anything
    assert not list((tmp_path / "stopped").glob("*/predictions/*/*.json"))

    marked = _run(tmp_path / "marked", calls, model, "mark")
    assert marked.returncode == 0, marked.stdout[-2000:] + marked.stderr[-2000:]
    assert len(calls.read_text().splitlines()) == 6  # every cell asked, the ones past the window too
    (run,) = (tmp_path / "marked").iterdir()
    import csv

    rows = list(csv.DictReader((run / "summary" / "needlebench_summary.csv").open(encoding="utf-8")))
    notes = {(r["lang"], r["length"]): r["windowed note"] for r in rows if r["task"] == "S-RT"}
    mark = "beyond window (native window 3,000, no RoPE scaling; scored)"
    assert notes[("EN", "4000")] == f"2 of 2 {mark}"
    assert notes[("EN", "all")] == notes[("OVERALL", "all")] == f"2 of 6 {mark}"
    assert notes[("EN", "1000")] == notes[("EN", "2000")] == ""
    assert all(r["windowed"] == "100.00" for r in rows if r["task"] == "S-RT")  # the oracle: scored as answered
    assert mark in (run / "summary" / "report.html").read_text(encoding="utf-8")
    (effective,) = csv.DictReader((run / "summary" / "needlebench_effective_length.csv").open(encoding="utf-8"))
    assert (effective["lang"], effective["beyond_window_from"]) == ("EN", "4000")
    assert [r["windowed beyond_window"] for r in rows if r["length"] in ("1000", "4000", "all")] == ["0", "2", "2", "2"]
    board = tmp_path / "board"
    made = subprocess.run([bin_path("needlebench"), "leaderboard", str(run), "-o", str(board)], capture_output=True)
    assert made.returncode == 0, made.stderr
    (suite,) = [
        r for r in csv.DictReader((board / "leaderboard.csv").open(encoding="utf-8")) if r["model"] == "windowed"
    ]
    assert "effective: beyond the model's context window from 4k" in suite["note"], suite["note"]
    assert f"S-RT/EN, S-RT/mean: 2 of 6 {mark}" in suite["note"]
    verified = subprocess.run(
        [bin_path("needlebench"), "verify", str(run / "summary" / "results.json"), str(run)],
        capture_output=True,
        text=True,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr  # the marks are recomputed from the plan


def test_a_rope_sweep_is_one_model_per_factor_as_each_engine_takes_it(tmp_path: Path) -> None:
    from needlebench.opencompass.models import api_model, rope_sweep

    folder = _model_folder(tmp_path / "m", max_position_embeddings=32768)
    hf, vllm = hf_model("m", folder, max_seq_len=131072), vllm_model("m", folder, max_seq_len=131072)
    swept = rope_sweep(hf, (1, 2, 4), original_max_position_embeddings=32768)
    assert [m["abbr"] for m in swept] == ["m@rope-x1", "m@yarn-x2", "m@yarn-x4"]
    assert [read_window(m).usable for m in swept] == [32768, 65536, 131072]
    assert "rope_scaling" not in swept[0]["model_kwargs"] and hf["abbr"] == "m"  # the model given is left alone
    swept = rope_sweep(vllm, (1, 4), original_max_position_embeddings=32768, rope_key="rope_parameters")
    assert "hf_overrides" not in swept[0]["model_kwargs"]
    assert swept[1]["model_kwargs"]["hf_overrides"]["rope_parameters"]["factor"] == 4.0
    assert swept[1]["model_kwargs"]["max_model_len"] == 131072  # the engine settings stay
    lmdeploy = rope_sweep(lmdeploy_model("m", folder, max_seq_len=65536), (1, 2), kind="dynamic")
    assert [m["engine_config"].get("rope_scaling_factor") for m in lmdeploy] == [None, 2.0]
    assert [read_window(m).usable for m in lmdeploy] == [32768, 65536]
    api = api_model("a", "served", base_url="http://127.0.0.1:1/v1", max_seq_len=32768)
    for call, named in (
        (lambda: rope_sweep(api, (1, 2)), "server applies it"),
        (lambda: rope_sweep(lmdeploy_model("m", folder, max_seq_len=65536), (2,)), "dynamic scaling only"),
        # LMDeploy's PyTorch engine has no factor field: it would run unscaled while the plan counts the scaling
        (
            lambda: rope_sweep(
                lmdeploy_model("m", folder, max_seq_len=65536, backend="pytorch"), (1, 2), kind="dynamic"
            ),
            "TurboMind backend only",
        ),
        (lambda: rope_sweep(hf, ()), "at least one factor"),
        (lambda: rope_sweep(hf, (1, 0.5)), "at least 1"),
        (lambda: rope_sweep(hf, (2, 2)), "different"),
    ):
        with pytest.raises(ConfigError, match=named) as err:
            call()
        assert "\n" not in str(err.value)


def test_review_cases_gemma_layers_llama_scaling_and_paths_that_are_no_hub_names(tmp_path: Path) -> None:
    """Gemma 2/3 say their layers mix sliding and full attention without layer_types; a run's scaling block
    without an original stretches max_position_embeddings (as HF and LMDeploy do); a relative path that is no
    folder here reads no window instead of failing."""
    for extra in ({"cache_implementation": "hybrid"}, {"sliding_window_pattern": 6}):
        folder = _model_folder(
            tmp_path / str(len(extra)) / next(iter(extra)), max_position_embeddings=8192, sliding_window=4096, **extra
        )
        assert read_window(hf_model("g", folder, max_seq_len=8192)).sliding is None
    llama = _model_folder(
        tmp_path / "llama31",
        max_position_embeddings=131072,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192},
    )
    w = read_window(hf_model("l", llama, max_seq_len=262144, rope=rope_scaling("yarn", 2)))
    assert (w.native, w.usable) == (8192, 262144)
    gemma3 = _model_folder(
        tmp_path / "gemma3", max_position_embeddings=131072, rope_scaling={"rope_type": "linear", "factor": 8.0}
    )
    assert read_window(hf_model("g", gemma3, max_seq_len=131072)).usable == 131072
    assert read_window({"abbr": "rel", "path": "ckpt/llama/step1000"}) is None
    assert read_window({"abbr": "home", "path": "~/models/qwen"}) is None


def test_engine_fields_are_written_and_read_in_the_placement_module_only() -> None:
    """Where an engine takes RoPE scaling is known in one module (``needlebench/placement.py``): no other module of
    the package names vLLM's ``hf_overrides`` or TurboMind's factor field, but the API server preflight, which
    reads what a server reports under that name."""
    package = ROOT / "needlebench"
    naming = sorted(
        p.relative_to(package).as_posix()
        for p in package.rglob("*.py")
        if re.search(r"hf_overrides|rope_scaling_factor", p.read_text(encoding="utf-8"))
    )
    assert naming == ["placement.py", "preflight/api_server.py"], naming
