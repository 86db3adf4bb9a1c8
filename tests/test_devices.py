"""GPUs checked before OpenCompass's ``LocalRunner`` starts a task (``preflight/devices.py``).

The count against the runner's own (its ``assert`` where the check stops a run), the partitioner's hook on a small
config, ``needlebench plan`` and a real ``needlebench run`` of the shipped 128k config with no visible GPU: one
line naming the model, the GPUs it asks for, the GPUs visible and the ways on; no traceback, no task started.
A model with ``num_gpus=0`` is unaffected.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, bin_path

from needlebench.commands.plan import PlanReport, format_plan, plan_config
from needlebench.errors import ConfigError
from needlebench.opencompass.configs import INFER_TASK
from needlebench.preflight.devices import (
    Visible,
    check_devices,
    device_line,
    devices_note,
    task_gpus,
    visible_gpus,
)

CONFIG_128K = "configs/eval_needlebench_128k.py"
LOCAL = {"type": "LocalRunner"}
NONE_VISIBLE = Visible(0, "CUDA_VISIBLE_DEVICES=''")
# the shipped 128k config's model: Qwen2.5-7B-Instruct on vLLM, tensor parallel 2
LINE_128K = (
    "devices: qwen2.5-7b-instruct-vllm-128k asks for 2 GPUs per task and this machine shows 0 "
    "(CUDA_VISIBLE_DEVICES=''): the run stops before any task starts. Ways on: a node with 2 GPUs; a cluster, "
    "runtime(runner='SlurmRunner', partition=...); or the CPU model, configs/models/smollm2_135m_cpu.py "
    "(NEEDLEBENCH_MODELS=models/smollm2_135m_cpu.py where the config calls load_models)"
)


def test_visible_gpus_are_counted_as_the_local_runner_counts_them() -> None:
    """The ids in CUDA_VISIBLE_DEVICES by the runner's pattern ("-1" hides all), distinct: a task asking for 2 GPUs
    where only id 3 is visible passes the runner's ``len(gpus) >= 2`` (gpus has 4 slots) and then waits forever."""
    import torch

    counts = {v: visible_gpus({"CUDA_VISIBLE_DEVICES": v}).count for v in ("", "-1", "0", "0,1", "3", "0,1,1", "2,5")}
    assert counts == {"": 0, "-1": 0, "0": 1, "0,1": 2, "3": 1, "0,1,1": 2, "2,5": 2}
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "0,1"}).source == "CUDA_VISIBLE_DEVICES='0,1'"
    unset = visible_gpus({})
    assert (unset.count, unset.source) == (torch.cuda.device_count(), "torch.cuda.device_count()")


def test_the_check_stops_where_the_local_runner_asserts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """OpenCompass's own LocalRunner, given an infer task of a model asking for a GPU on a machine showing none,
    fails with its bare assert in a worker thread (or at once in debug mode); the check says it in one line first."""
    from mmengine.config import ConfigDict
    from opencompass.runners import LocalRunner

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    model = {"abbr": "gpu-model", "type": "x", "run_cfg": {"num_gpus": 1}}
    task = ConfigDict(models=[model], datasets=[[{"abbr": "d", "type": "x"}]], work_dir=str(tmp_path))
    for debug in (False, True):
        runner = LocalRunner(task=ConfigDict(type=INFER_TASK), max_num_workers=1, debug=debug)
        with pytest.raises(AssertionError):
            list(runner.launch([task]))
    with pytest.raises(ConfigError) as err:
        check_devices([("gpu-model", task_gpus(model))], LOCAL)
    assert str(err.value) == device_line([("gpu-model", 1)], NONE_VISIBLE)
    assert str(err.value).startswith("devices: gpu-model asks for 1 GPU per task and this machine shows 0 (")


def test_what_the_check_leaves_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU asked (num_gpus 0 or unset), enough shown, or another runner (Slurm places tasks on its nodes)."""
    assert task_gpus({"run_cfg": {"num_gpus": 0}}) == task_gpus({}) == 0
    check_devices([("cpu", 0), ("api", 0)], LOCAL, NONE_VISIBLE)
    check_devices([("gpu", 2)], LOCAL, Visible(2, "CUDA_VISIBLE_DEVICES='0,1'"))
    check_devices([("gpu", 8)], {"type": "SlurmRunner", "partition": "gpu"}, NONE_VISIBLE)
    with pytest.raises(ConfigError, match="^devices: gpu asks for 8 GPUs"):  # no runner section: the local one
        check_devices([("gpu", 8)], None, NONE_VISIBLE)
    assert device_line([("a", 1), ("b", 0), ("c", 4)], Visible(2, "torch.cuda.device_count()")) == (
        "devices: c asks for 4 GPUs per task and this machine shows 2 (torch.cuda.device_count()): the run stops "
        "before any task starts. Ways on: a node with 4 GPUs; a cluster, runtime(runner='SlurmRunner', "
        "partition=...); or the CPU model, configs/models/smollm2_135m_cpu.py (NEEDLEBENCH_MODELS="
        "models/smollm2_135m_cpu.py where the config calls load_models)"
    )
    assert devices_note("cpu", 0, LOCAL) == ("", False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # no runner section: OpenCompass's default, the local one
    assert devices_note("gpu", 1, None) == (
        "devices: 1 GPU per task; this machine shows 1 (CUDA_VISIBLE_DEVICES='0')",
        False,
    )
    assert devices_note("gpu", 2, {"type": "opencompass.runners.SlurmRunner"}) == (
        "devices: 2 GPUs per task, placed by SlurmRunner",
        False,
    )


SMALL = """_base_ = []
from needlebench.opencompass.configs import needlebench_datasets, runtime
_model = dict(type="opencompass.models.HuggingFacewithChatTemplate", path="org/not-downloaded", max_seq_len=8192,
              max_out_len=16, batch_size=1)
models = [{models}]
datasets = needlebench_datasets(suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[50], repeats=1)
infer, eval = runtime(num_shards=2{runner})
"""


def _partition(tmp_path: Path, models: str, runner: str = "") -> list:
    """The infer partitioner called as ``opencompass`` calls it (with the whole config, runner included)."""
    from mmengine.config import Config

    from needlebench.opencompass.partitioner import NeedleBenchPartitioner

    tmp_path.mkdir()
    path = tmp_path / "config.py"
    path.write_text(SMALL.format(models=models, runner=runner), encoding="utf-8")
    cfg = Config.fromfile(str(path))
    cfg["work_dir"] = str(tmp_path / "run")
    settings = {k: v for k, v in cfg["infer"]["partitioner"].items() if k != "type"}
    return NeedleBenchPartitioner(out_dir=str(tmp_path / "run" / "predictions"), **settings)(cfg)


def test_the_partitioner_stops_a_local_run_before_its_tasks_and_leaves_cpu_models_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    cpu = 'dict(_model, abbr="cpu", run_cfg=dict(num_gpus=0)), dict(_model, abbr="unset")'
    tasks = _partition(tmp_path / "cpu", cpu)
    assert [t["models"][0]["abbr"] for t in tasks] == ["cpu", "unset"]  # one sample: one task each
    gpu = f'{cpu}, dict(_model, abbr="one", run_cfg=dict(num_gpus=1)), dict(_model, abbr="four", run_cfg=dict(num_gpus=4))'
    with pytest.raises(SystemExit) as stop:
        _partition(tmp_path / "gpu", gpu)
    assert str(stop.value) == (
        "needlebench: devices: one asks for 1 GPU per task; four asks for 4 GPUs per task and this machine shows 0 "
        "(CUDA_VISIBLE_DEVICES=''): the run stops before any task starts. Ways on: a node with 4 GPUs; a cluster, "
        "runtime(runner='SlurmRunner', partition=...); or the CPU model, configs/models/smollm2_135m_cpu.py "
        "(NEEDLEBENCH_MODELS=models/smollm2_135m_cpu.py where the config calls load_models)"
    )
    assert not list((tmp_path / "gpu" / "run").glob("predictions/*/*"))
    assert not (tmp_path / "gpu" / "run" / "needlebench_plan.json").exists()  # a fresh run: stopped before planning


@pytest.fixture(scope="module")
def plan_128k() -> PlanReport:
    """``needlebench plan`` of the shipped 128k config on a machine showing no GPU (its model: the config's own)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDA_VISIBLE_DEVICES", "")
        mp.delenv("NEEDLEBENCH_MODELS", raising=False)
        return plan_config(str(ROOT / CONFIG_128K))


def test_needlebench_plan_says_the_line_the_run_stops_with(plan_128k: PlanReport) -> None:
    (model,) = plan_128k.models
    assert (model.num_gpus, model.devices, model.devices_stop) == (2, LINE_128K, True)
    assert [x for x in format_plan(plan_128k).splitlines() if "devices" in x] == [f"  {LINE_128K}"]


@pytest.mark.e2e
def test_the_shipped_128k_config_stops_with_one_line_on_a_machine_without_gpus(
    plan_128k: PlanReport, tmp_path: Path
) -> None:
    """The real command (``needlebench run``: OpenCompass's command line) plans the run, then stops before the
    runner starts a task: exit 1, the plan's line, no traceback, no progress bar, nothing launched or predicted."""
    env = {k: v for k, v in os.environ.items() if k != "NEEDLEBENCH_MODELS"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    r = subprocess.run(
        [bin_path("needlebench"), "run", CONFIG_128K, "-w", str(tmp_path / "run")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    said = r.stdout + r.stderr
    assert r.returncode == 1, said[-3000:]
    assert [x for x in r.stderr.splitlines() if x.startswith("needlebench: ")] == [f"needlebench: {LINE_128K}"]
    for absent in ("Traceback", "AssertionError", "0/8", "launch "):
        assert absent not in said, (absent, said[-3000:])
    assert not list((tmp_path / "run").glob("*/predictions/*/*"))
