"""Our task processes' entry point (``needlebench.launch.task_entry``): OpenCompass's task code runs without
importing every dataset and model module OpenCompass ships, and whatever asks for a package's names still gets them.

Behaviour, not time: which modules a fresh process holds (the time it saves is in ``bench/``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, bin_path, run_opencompass
from mmengine.config import Config

from needlebench.launch.task_entry import typed_by_path


def _fresh(code: str, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter (``sys.argv[1:]`` = ``args``); the JSON its last line prints."""
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _modules_after(code: str) -> dict:
    """Run ``code`` in a fresh interpreter after installing the lazy packages; what it prints (JSON)."""
    prelude = (
        "import sys, json\nfrom needlebench.launch.task_entry import install_lazy_packages, import_with_stand_ins\n"
        "install_lazy_packages()\nimport_with_stand_ins()\n"
    )
    return _fresh(prelude + code)


def test_the_task_modules_import_without_every_dataset_and_model() -> None:
    found = _modules_after(
        "import opencompass.tasks.openicl_infer, needlebench.opencompass.eval_task\n"
        "import needlebench.opencompass.api, needlebench.opencompass.dataset, needlebench.opencompass.evaluator\n"
        "ds = [m for m in sys.modules if m.startswith('opencompass.datasets.')]\n"
        "ms = [m for m in sys.modules if m.startswith('opencompass.models.')]\n"
        "ev = [m for m in sys.modules if m.startswith('opencompass.openicl.icl_evaluator.')]\n"
        "tf = [m for m in sys.modules if m.split('.')[0] == 'transformers']\n"
        "torch = [m for m in sys.modules if m.split('.')[0] == 'torch']\n"
        "stats = 'scipy.stats' in sys.modules\n"
        "from opencompass.openicl.icl_evaluator import icl_base_evaluator as base\n"  # G-pass@k: the real hypergeom
        "g = base._compute_g_pass_at_k(8, 5, 4, 2)\n"
        "from scipy.stats import hypergeom\n"
        "g_real = float(hypergeom.sf(1, 8, 5, 4))\n"
        "from opencompass.openicl.icl_dataset_reader import AutoTokenizer\n"  # the reader's, used the first time
        "real = AutoTokenizer.from_pretrained.__qualname__\n"
        "import transformers\n"  # the real package, not the stand-in the reader was imported with
        "print(json.dumps({'datasets': ds, 'models': ms, 'tasks': [m for m in sys.modules if m.startswith('opencompass.tasks.')],"
        " 'evaluators': ev, 'transformers': tf, 'torch': torch, 'real': real, 'package': transformers.__file__,"
        " 'stats': stats, 'g': float(g), 'g_real': g_real}))\n"
    )
    # neither every evaluator OpenCompass ships nor transformers before a model asks for it
    assert found["evaluators"] == ["opencompass.openicl.icl_evaluator.icl_base_evaluator"], found["evaluators"]
    assert found["transformers"] == [] and found["stats"] is False, (found["transformers"], found["stats"])
    assert found["torch"] == [], found["torch"]  # nor torch, which only a model that needs it imports
    assert found["g"] == found["g_real"] and 0 < found["g"] < 1, found  # the stand-in's name is the real one
    assert found["real"] == "AutoTokenizer.from_pretrained" and found["package"].endswith("transformers/__init__.py")
    # OpenCompass's own package imports bring ~300 dataset modules and every model module; here only what is used
    assert found["datasets"] == ["opencompass.datasets.base"], found["datasets"]
    assert "opencompass.models.openai_api" in found["models"] and len(found["models"]) <= 5, found["models"]
    assert not any("huggingface" in m or "vllm" in m or "turbomind" in m for m in found["models"]), found["models"]
    assert set(found["tasks"]) == {
        "opencompass.tasks.base",
        "opencompass.tasks.openicl_infer",
        "opencompass.tasks.openicl_eval",
    }


def test_what_stands_for_torch_answers_as_before_torch_and_is_torch_once_a_model_imports_it() -> None:
    """OpenCompass's modules keep the stand-ins they were imported with: each answers what a process without
    torch knows (no process group: rank 0, the main process), and torch's own answer once torch is imported."""
    found = _modules_after(
        "from opencompass.openicl.icl_inferencer import icl_base_inferencer as bi, icl_gen_inferencer as gi\n"
        "from opencompass.openicl.icl_retriever import icl_base_retriever as br\n"
        "from opencompass.models import base as mb\n"
        "import importlib\n"
        "ol = importlib.import_module('opencompass.openicl.utils.logging')\n"
        "before = [bi.is_main_process(), br.is_main_process(), mb.dist.get_rank(), mb.dist.get_world_size(),"
        " ol.dist.is_available() and ol.dist.is_initialized(), 'torch' in sys.modules]\n"
        "import torch, mmengine.dist\n"
        "x = torch.ones(1, requires_grad=True)\n"
        "with gi.torch.no_grad():\n"
        "    y = x * 2\n"
        "after = [bi.is_main_process() == mmengine.dist.is_main_process(), mb.dist.get_rank() == mmengine.dist.get_rank(),"
        " ol.dist.is_initialized() == torch.distributed.is_initialized(), mb.torch.long is torch.long,"  # not listed: real
        " y.requires_grad, len(list(bi.DataLoader([1, 2, 3], batch_size=2)))]\n"
        "print(json.dumps({'before': before, 'after': after}))\n"
    )
    assert found["before"] == [True, True, 0, 1, False, False], found
    assert found["after"] == [True, True, True, True, False, 2], found


def test_names_read_from_a_lazy_package_come_from_their_submodule_or_the_whole_package() -> None:
    found = _modules_after(
        "from opencompass.models import APITemplateParser\n"  # named in the package's __init__: its submodule only
        "one = sorted(m for m in sys.modules if m.startswith('opencompass.models.'))\n"
        "import opencompass.datasets as d\n"
        "cls = d.AFQMCDatasetV2\n"  # a name from a `from .x import *` line: the whole package runs once
        "print(json.dumps({'one': one, 'whole': len([m for m in sys.modules if m.startswith('opencompass.datasets.')]),"
        " 'cls': cls.__module__, 'parser': APITemplateParser.__module__}))\n"
    )
    assert found["one"] == ["opencompass.models.base", "opencompass.models.base_api"], found["one"]
    assert found["parser"] == "opencompass.models.base_api"
    assert found["cls"] == "opencompass.datasets.afqmcd" and found["whole"] > 100


def test_only_configs_naming_every_type_by_path_go_lean() -> None:
    configs = {
        "by path": {
            "models": [{"type": "needlebench.opencompass.scripted.OracleModel"}],
            "datasets": [[{"type": "a.B", "odd key": {"type": "c.D"}}]],
        },
        "short name": {
            "models": [{"type": "needlebench.x.Y"}],
            "datasets": [[{"infer_cfg": {"retriever": {"type": "ZeroRetriever"}}}]],
        },
        "short name, quoted key": {"datasets": [[{"odd key": {"type": "ZeroRetriever"}}]]},  # {'type': ...}
    }
    for formatted in (True, False):  # as a runner dumps a task config: yapf-formatted or not
        text = {name: Config(cfg, format_python_code=formatted).pretty_text for name, cfg in configs.items()}
        assert typed_by_path(text["by path"]), text["by path"]
        assert not typed_by_path(text["short name"]), text["short name"]
        assert not typed_by_path(text["short name, quoted key"]), text["short name, quoted key"]


def test_the_lean_driver_imports_only_what_a_run_uses_and_finds_registry_names() -> None:
    """``needlebench run``'s start: OpenCompass's command line module without evaluate, transformers' pipelines,
    sklearn or the dataset modules; a short registry name (``MMLUDataset``) still found, the packages
    loaded whole."""
    code = (
        "import sys, json\nfrom needlebench.launch import driver\n"
        "assert driver.start_lean(driver.DRIVER_LAZY_PACKAGES, driver.DRIVER_STAND_INS) is None\n"
        "driver.load_whole_on_registry_miss()\n"
        "import opencompass.cli.main, needlebench.opencompass.partitioner, needlebench.opencompass.summarizer\n"
        "heavy = sorted({'evaluate', 'sklearn', 'transformers.pipelines'} & set(sys.modules))\n"
        "ds = [m for m in sys.modules if m.startswith('opencompass.datasets.')]\n"
        "from opencompass.registry import LOAD_DATASET\n"
        "found = LOAD_DATASET.get('MMLUDataset')\n"
        "print(json.dumps({'heavy': heavy, 'datasets': ds, 'found': f'{found.__module__}.{found.__name__}',"
        " 'custom': 'opencompass.datasets.custom' in sys.modules}))\n"
    )
    found = _fresh(code)
    assert found["heavy"] == [] and found["datasets"] == [], found
    # the miss loaded the packages whole, as OpenCompass imports them
    assert found["found"] == "opencompass.datasets.mmlu.MMLUDataset", found
    assert found["custom"] is True


ACCELERATED = """
_base_ = []
models = [dict(type="opencompass.models.huggingface_above_v4_33.HuggingFacewithChatTemplate", abbr="m", path="/m", max_seq_len=4096,
               max_out_len=16, batch_size=1, run_cfg=dict(num_gpus=1))]
datasets = []
"""


def test_the_driver_imports_no_model_class_until_the_command_line_reads_one(tmp_path: Path) -> None:
    """``opencompass.utils.run`` takes eight model classes as it imports; the lean driver stands in for them (no
    transformers: 1.5 s of CPU a run) and ``opencompass.models`` still gives the real classes after. A command
    line that reads them, as OpenCompass's parser takes it (abbreviated, grouped, ``=``-joined), gets the real
    ones: ``--accelerator`` moves the HuggingFace model to vLLM or LMDeploy, as ``opencompass`` does."""
    config = tmp_path / "accelerated.py"
    config.write_text(ACCELERATED, encoding="utf-8")
    code = (
        "import sys, json, importlib\nfrom needlebench.launch import driver\n"
        "assert driver.start_lean(driver.DRIVER_LAZY_PACKAGES, driver.DRIVER_STAND_INS) is None\n"
        "driver.real_classes_when_read()\n"
        "from opencompass.cli.main import parse_args\nfrom opencompass.utils import run\n"
        "sys.argv = ['opencompass', *sys.argv[1:]]\n"
        "(model,) = run.get_config_from_arg(parse_args())['models']\n"
        "real = importlib.import_module('opencompass.models').HuggingFacewithChatTemplate\n"
        "print(json.dumps({'transformers': 'transformers' in sys.modules, 'type': str(model['type']),"
        " 'real': f'{real.__module__}.{real.__name__}'}))\n"
    )
    real = "opencompass.models.huggingface_above_v4_33.HuggingFacewithChatTemplate"  # as change_accelerator names it
    assert _fresh(code, str(config)) == {"transformers": False, "type": real, "real": real}
    lmdeploy = "opencompass.models.turbomind_with_tf_above_v4_33.TurboMindModelwithChatTemplate"
    assert _fresh(code, str(config), "-a", "lmdeploy") == {"transformers": True, "type": lmdeploy, "real": real}
    # what decides it is the parsed accelerator: every spelling OpenCompass's parser takes reads as one (one process)
    spellings = [["--accelerator", "vllm"], ["-avllm"], ["--acc", "vllm"], ["--accel=lmdeploy"], ["-a", "lmdeploy"]]
    parsed = (
        "import sys, json\nfrom needlebench.launch import driver\n"
        "assert driver.start_lean(driver.DRIVER_LAZY_PACKAGES, driver.DRIVER_STAND_INS) is None\n"
        "from opencompass.cli.main import parse_args\nread = []\n"
        f"for option in {spellings!r}:\n"
        "    sys.argv = ['opencompass', sys.argv[1], *option]\n    read.append(parse_args().accelerator)\n"
        "print(json.dumps({'read': read, 'transformers': 'transformers' in sys.modules}))\n"
    )
    assert _fresh(parsed, str(config)) == {
        "read": ["vllm", "vllm", "vllm", "lmdeploy", "lmdeploy"],
        "transformers": False,
    }


def _files(run: Path) -> dict[str, bytes]:
    """A run's files by path, the time stamp in OpenCompass's summary names and log paths left out."""
    out = {}
    for path in sorted(run.rglob("*")):
        rel = path.relative_to(run).as_posix().replace(run.name, "TIME")
        if path.is_file() and not rel.startswith(("logs/", "configs/")) and path.suffix in (".json", ".csv", ".md"):
            out[rel] = path.read_bytes()
    return out


def test_needlebench_run_writes_the_files_the_opencompass_command_writes(tmp_path: Path) -> None:
    """The same config through ``opencompass`` and through ``needlebench run``: the same prediction, result and
    summary files, byte for byte (OpenCompass's own summary included)."""
    plain = run_opencompass("tests/configs/e2e_driver.py", tmp_path / "plain", command=[bin_path("opencompass")])
    lean = run_opencompass("tests/configs/e2e_driver.py", tmp_path / "lean", command=[bin_path("needlebench"), "run"])
    a, b = _files(plain), _files(lean)
    assert sorted(a) == sorted(b)
    assert any(k.startswith("predictions/oracle/") for k in a) and "summary/summary_TIME.csv" in a, sorted(a)
    for files in (a, b):  # who ran the stage and when (runfolder/lifecycle.py): the one thing two runs differ in
        plan = json.loads(files["needlebench_plan.json"])
        plan["history"] = [{k: v for k, v in h.items() if k not in ("at", "pid")} for h in plan["history"]]
        files["needlebench_plan.json"] = json.dumps(plan).encode()
    # the ledger, its forecast and results.json hold what the clock said (report/ledger.py, report/forecast.py):
    # the other thing two runs differ in
    clocked = ("results.json", "needlebench_cost.csv", "needlebench_cost_forecast.csv")
    different = [k for k in a if a[k] != b[k] and not k.endswith(clocked)]
    assert not different, different
    table = (plain / "summary" / "needlebench_summary.csv").read_text(encoding="utf-8")
    assert "100" in table, table


def test_another_release_or_a_renamed_module_turns_the_lean_start_off() -> None:
    """On an OpenCompass or mmengine the stand-ins were not written for, nothing is put in place; a stand-in
    target that cannot be imported leaves no lazy shell or stand-in in ``sys.modules``."""
    code = (
        "import json, sys\n"
        "import needlebench.launch.task_entry as t\n"
        "before = set(sys.modules)\n"
        "t.WRITTEN_FOR['opencompass'] = (('opencompass',), r'9\\.9\\.9')\n"
        "other = t.start_lean()\n"
        "after_other = sorted(set(sys.modules) - before)\n"
        "t.WRITTEN_FOR['opencompass'] = (('opencompass',), r'0\\.5\\.4')\n"
        "t.STAND_INS['opencompass.renamed_in_another_release'] = t.StandIns(first=(), packages={'torch': {'Tensor': t.LAZY}})\n"
        "renamed = t.start_lean()\n"
        "left = [n for n, m in sys.modules.items() if isinstance(m, t._LAZY_KINDS)]\n"
        "print(json.dumps({'other': other, 'after_other': after_other, 'renamed': renamed, 'left': left}))\n"
    )
    found = _fresh(code)
    assert found["other"].startswith("opencompass 0.5.4 is not the release the lean start was written for")
    assert not [m for m in found["after_other"] if m.startswith("opencompass")], found["after_other"]
    assert found["renamed"].startswith("ModuleNotFoundError: No module named 'opencompass.renamed_in_another_release'")
    assert found["left"] == [], found["left"]


def test_a_task_whose_lean_start_fails_imports_opencompass_in_full_and_writes_the_same_files(tmp_path: Path) -> None:
    """A real infer task whose stand-ins name a module this OpenCompass lacks (as a renamed module would) says so
    once, imports OpenCompass in full and writes the very prediction files the lean task wrote."""
    config = tmp_path / "keep.py"  # the driver's oracle config, its task files kept (tmp/ in the current folder)
    text = (ROOT / "tests" / "configs" / "e2e_driver.py").read_text(encoding="utf-8")
    config.write_text(text.replace("eval_workers=1)", "eval_workers=1, keep_tmp_file=True)"), encoding="utf-8")
    done = subprocess.run(
        [bin_path("needlebench"), "run", str(config), "-w", "work"], cwd=tmp_path, capture_output=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (run,) = (tmp_path / "work").iterdir()
    (infer,) = [p for p in (tmp_path / "tmp").glob("*_params.py") if "metric_names" not in p.read_text()]
    lean = run / "predictions" / "oracle"
    lean.rename(run / "predictions" / "lean")
    code = (
        "import json, sys\n"
        "import needlebench.launch.task_entry as t\n"
        "t.STAND_INS['opencompass.renamed_in_another_release'] = t.StandIns(first=(), packages={'torch': {'Tensor': t.LAZY}})\n"
        "t.main(['infer', sys.argv[1]])\n"
        "print(json.dumps({'datasets': sum(m.startswith('opencompass.datasets.') for m in sys.modules),"
        " 'lazy': [n for n, m in sys.modules.items() if isinstance(m, t._LAZY_KINDS)]}))\n"
    )
    full = subprocess.run(
        [sys.executable, "-c", code, str(infer)], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert full.returncode == 0, full.stderr[-3000:]
    found = json.loads(full.stdout.strip().splitlines()[-1])
    assert found["lazy"] == [] and found["datasets"] > 50, found  # OpenCompass's whole package, as its script has it
    assert full.stderr.count("the lean task start is off (ModuleNotFoundError") == 1, full.stderr[-2000:]
    again = {p.name: p.read_bytes() for p in lean.iterdir() if p.suffix == ".json"}
    before = {p.name: p.read_bytes() for p in (run / "predictions" / "lean").iterdir() if p.suffix == ".json"}
    assert again and again == before


def test_a_task_command_without_its_script_is_refused_not_swapped_quietly() -> None:
    from needlebench.launch.task_entry import MODULE, through_entry

    assert through_entry("python /oc/openicl_infer.py cfg.py", "/oc/openicl_infer.py", "infer") == (
        f"python -m {MODULE} infer cfg.py"
    )
    for command in ("python -m opencompass.tasks.openicl_infer cfg.py", "x /oc/openicl_infer.py /oc/openicl_infer.py"):
        with pytest.raises(RuntimeError, match="does not run /oc/openicl_infer.py once"):
            through_entry(command, "/oc/openicl_infer.py", "infer")
