"""``needlebench plan``: its numbers against an export and the partitioner of the same config."""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, run_export

from needlebench.commands.cli import main
from needlebench.commands.plan import PlanReport, format_plan, plan_config
from needlebench.opencompass.partitioner import NeedleBenchPartitioner
from needlebench.planning.prefix import common_prefix
from needlebench.runfolder.plan_file import read_plan

CONFIG = "tests/configs/plan_tiny.py"


@pytest.fixture(scope="module")
def plan() -> PlanReport:
    return plan_config(str(ROOT / CONFIG))


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return run_export(CONFIG, tmp_path_factory.mktemp("plan_export") / "out.jsonl")


def test_samples_and_cl100k_tokens_match_an_export(plan: PlanReport, exported: list[dict]) -> None:
    samples, tokens = Counter(), Counter()
    for row in exported:
        samples[row["dataset"]] += 1
        tokens[row["dataset"]] += row["meta"]["prompt_tokens"]
    long = next(m for m in plan.models if m.abbr == "long")
    assert {d.abbr: d.samples for d in long.datasets} == dict(samples)
    assert {d.abbr: d.prompt_tokens for d in long.datasets} == dict(tokens)
    assert long.samples == len(exported) and long.prompt_tokens == sum(tokens.values())
    assert long.num_shortened == long.num_skipped == 0
    # output budget: samples x the model's max_out_len (the datasets set none)
    assert long.output_tokens == 64 * len(exported)


def test_short_model_shows_the_cells_the_partitioner_records(plan: PlanReport, tmp_path: Path) -> None:
    from mmengine.config import Config

    cfg = Config.fromfile(str(ROOT / CONFIG))
    short = next(m for m in cfg["models"] if m["abbr"] == "short")
    part = NeedleBenchPartitioner(out_dir=str(tmp_path / "predictions"), num_shards=2)
    part.partition(
        [{"models": [short], "datasets": list(cfg["datasets"])}],
        work_dir=str(tmp_path),
        out_dir=str(tmp_path / "predictions"),
    )
    recorded = read_plan(tmp_path).model("short").overlength  # type: ignore[union-attr]
    planned = next(m for m in plan.models if m.abbr == "short")
    cut = {d.abbr: d for d in planned.datasets if d.num_shortened or d.num_skipped}
    assert set(cut) == set(recorded) and cut  # the 2k cells do not fit 1,700 - 100 - 64 tokens
    for abbr, entry in recorded.items():
        assert cut[abbr].shortened == entry["shortened"]
        assert cut[abbr].skipped == entry["skipped"]
        assert cut[abbr].max_prompt_tokens == entry["max_prompt_tokens"]
        assert all(c[0] == 2000 for c in entry["shortened"] + entry["skipped"])
    text, verbose = format_plan(plan), format_plan(plan, verbose=True)
    assert "2000/" in verbose and "2000/" not in text  # by length on one line; per depth behind --verbose
    assert (
        "shortened to fit the room of 1,536 cl100k tokens (max_seq_len 1,700 - output 100 - reserve 64): length 2000 x"
        in text
    )


def test_shards_sum_to_the_total_and_follow_the_config(plan: PlanReport) -> None:
    for m in plan.models:
        assert len(m.shards) == plan.num_shards == 2
        assert sum(s.prompt_tokens for s in m.shards) == m.prompt_tokens
        assert sum(s.samples for s in m.shards) == m.samples
        assert sum(s.output_tokens for s in m.shards) == m.output_tokens


def test_prefix_share_is_a_share_and_positive_with_several_depths(plan: PlanReport) -> None:
    for m in plan.models:
        assert 0 <= m.prefix_share <= 1
        for d in m.datasets:
            assert 0 <= d.prefix_share <= 1
    srt = next(d for d in plan.models[0].datasets if d.task == "srt")
    assert srt.prefix_share > 0.2  # 3 depths x 2 repeats per length: the haystack before the needle is shared


def test_model_tokens_are_na_with_a_reason_without_a_local_tokenizer(plan: PlanReport) -> None:
    for m in plan.models:
        assert m.model_tokens is None and not m.tokenizer.available
        assert "not a local folder" in m.tokenizer.reason
    assert "n/a" in format_plan(plan)


def test_json_parses_and_shards_option(capsys: pytest.CaptureFixture) -> None:
    assert main(["plan", str(ROOT / CONFIG), "--json", "--shards", "3"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["num_shards"] == 3
    assert [m["abbr"] for m in data["models"]] == ["long", "short", "thinker"]
    assert all(len(m["shards"]) == 3 for m in data["models"])


def test_common_prefix_matches_python() -> None:
    rng = np.random.default_rng(0)
    for n in (0, 1, 5000, 70_000):
        a = rng.integers(0, 4, n, dtype=np.uint8)
        for cut in sorted({0, n // 3, n}):
            b = a.copy()
            if cut < n:
                b[cut] ^= 1
            assert common_prefix(a, b) == len(os.path.commonprefix([a.tobytes(), b.tobytes()]))
    assert common_prefix(np.zeros(10, np.uint8), np.zeros(4, np.uint8)) == 4


def test_bad_input_is_one_config_error(tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch) -> None:
    assert main(["plan", str(tmp_path / "missing.py")]) == 2
    assert "does not exist" in capsys.readouterr().err
    empty = tmp_path / "empty.py"
    empty.write_text("_base_ = []\nmodels = []\ndatasets = []\n")
    assert main(["plan", str(empty)]) == 2
    assert "no needlebench datasets" in capsys.readouterr().err
    monkeypatch.setenv("NEEDLEBENCH_MODELS", "models/no_such_model.py")
    assert main(["plan", str(ROOT / "configs/eval_needlebench_128k.py")]) == 2
    err = capsys.readouterr().err
    assert "no_such_model.py" in err and "Traceback" not in err
    assert main(["plan", str(ROOT / CONFIG), "--shards", "0"]) == 2


@pytest.mark.e2e
def test_local_tokenizer_estimates_model_tokens() -> None:
    """The bundled SmolLM2 (a local GGUF folder) gives model-token estimates (loads its tokenizer: slow)."""
    plan = plan_config(str(ROOT / "configs/eval_needlebench_tiny.py"))
    (m,) = plan.models
    assert m.tokenizer.available and m.tokenizer.sample_prompts > 0
    assert m.model_tokens is not None and m.model_tokens > 0
    by_lang = defaultdict(list)
    for d in m.datasets:
        by_lang[d.lang].append(d.model_tokens / d.prompt_tokens)
    assert min(by_lang["en"]) > 0.8


def test_planning_layer_imports_no_opencompass() -> None:
    """Room, limits, over-length cells and shards are decided without OpenCompass (the partitioner and
    ``needlebench plan`` share them): a fresh process plans one dataset and never imports it."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from needlebench.planning.limits import Limits, limited_dataset, overlength_cells, token_shards\n"
        "from needlebench.planning.settings import RunSettings\n"
        "model = {'abbr': 'm', 'max_seq_len': 400, 'max_out_len': 16}\n"
        "d = {'abbr': 'd', 'type': 'needlebench.opencompass.dataset.NeedleBenchDataset', 'task': 'srt',"
        " 'lang': 'en', 'lengths': [1000], 'depths': [50], 'repeats': 2}\n"
        "limits = Limits(RunSettings(num_shards=2))\n"
        "lim = limited_dataset(d, limits.decide(model, d))\n"
        "cells = overlength_cells(d, lim)\n"
        "stream, costs, ranges = token_shards(model, [(0, lim)], 2)\n"
        "assert cells['num_shortened'] == 2 and len(ranges) == 2, (cells, ranges)\n"
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'opencompass', 'mmengine'}))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "[]"


def test_reasoning_model_gets_its_thinking_room_at_the_longest_cell(plan: PlanReport, exported: list[dict]) -> None:
    """A reasoning model (reasoning(): OpenCompass's think strip as its postprocessor) is told, per dataset,
    what its context leaves for thinking beside the longest prompt, and what the run does where that is
    less than its budget; the others get no such line."""
    thinker = next(m for m in plan.models if m.abbr == "thinker")
    assert thinker.reasoning and not any(m.reasoning for m in plan.models if m.abbr != "thinker")
    assert all(d.thinking is None for m in plan.models if m.abbr != "thinker" for d in m.datasets)
    longest: dict[str, dict] = {}
    for row in exported:
        best = longest.get(row["dataset"])
        if best is None or row["meta"]["budget_tokens"] > best["meta"]["budget_tokens"]:
            longest[row["dataset"]] = row
    for d in thinker.datasets:
        t = d.thinking
        assert t is not None and t.cell == f"length {longest[d.abbr]['meta']['length']}" == "length 2000"
        assert t.prompt_tokens == longest[d.abbr]["meta"]["budget_tokens"] == t.model_tokens  # no local tokenizer
        assert t.room == 2700 - t.prompt_tokens - thinker.reserve and t.budget == 1200
        # 2,000 budgeted prompt tokens leave about 600 of the 1,200: the partitioner shortens the 2k cells
        assert not t.fits and t.action == "shortened" and {c[0] for c in d.shortened} == {2000}
        # every 2k prompt of the dataset, as the export holds them
        assert d.num_shortened == sum(r["dataset"] == d.abbr and r["meta"]["length"] == 2000 for r in exported)
    text = format_plan(plan)
    assert "thinking room at each dataset's longest cell" in text
    assert "less than the budget 1,200: the run shortens such prompts (overlength=shorten" in text
    assert text.count("thinking room at each") == 1


def test_the_plans_thinking_room_and_the_eval_stages_output_settings_are_one_limit(
    plan: PlanReport, tmp_path: Path
) -> None:
    """``needlebench plan`` and the run read the same ``Limit``: the thinking room's budget and the eval stage's
    output budget and tokenizer for the reasoning model are the plan's, and the room fits where the rows do."""
    from mmengine.config import Config

    from needlebench.opencompass.partitioner import NeedleBenchPartitioner
    from needlebench.runfolder.plan_file import StoredPlan, write_stored

    thinker = next(m for m in plan.models if m.abbr == "thinker")
    run = plan.run.model("thinker")
    cfg = Config.fromfile(str(ROOT / CONFIG))
    models = [dict(m) for m in cfg["models"]]
    write_stored(tmp_path, StoredPlan(plan.run))
    tasks = NeedleBenchPartitioner(out_dir=str(tmp_path / "results"), stage="eval").partition(
        [{"models": models, "datasets": [dict(d) for d in cfg["datasets"]]}],
        work_dir=str(tmp_path),
        out_dir=str(tmp_path / "results"),
    )
    evaluators = {
        d["abbr"]: d["eval_cfg"]["evaluator"]
        for t in tasks
        if t["models"][0]["abbr"] == "thinker"
        for d in t["datasets"][0]
    }
    for d in thinker.datasets:
        limit = run.limits[d.abbr]
        assert d.thinking.budget == limit.out_len == evaluators[d.abbr]["max_out_len"] == d.max_out_len
        assert evaluators[d.abbr]["output_tokenizer"] == limit.output_tokenizer
        assert d.thinking.fits == (d.thinking.prompt_tokens <= limit.max_prompt_tokens)
        assert d.thinking.fits == (d.thinking.room >= d.thinking.budget) == (d.num_shortened + d.num_skipped == 0)


def test_run_settings_are_declared_once_and_read_alike_by_runtime_partitioner_and_plan(tmp_path):
    """runtime() writes one settings record into both stages; the partitioner and ``needlebench plan`` read
    the same record back; an unknown or bad setting is one ConfigError naming it, wherever it is given."""
    from mmengine.config import ConfigDict

    from needlebench.commands.plan import _settings
    from needlebench.errors import ConfigError
    from needlebench.opencompass.configs import runtime
    from needlebench.opencompass.partitioner import NeedleBenchPartitioner
    from needlebench.planning.settings import RunSettings

    infer, evaluation = runtime(num_shards=3, overlength="skip", eval_workers=2, template_margin=80)
    want = RunSettings(num_shards=3, overlength="skip", template_margin=80, eval_tasks=2)
    for stage, section in (("infer", infer), ("eval", evaluation)):
        options = {k: v for k, v in section["partitioner"].items() if k != "type"}
        partitioner = NeedleBenchPartitioner(out_dir=str(tmp_path), **options)
        assert partitioner.stage == stage and partitioner.settings == want
        assert partitioner.settings.eval_tasks == 2
    assert _settings(ConfigDict(infer=infer), None) == want
    assert _settings(ConfigDict(infer=infer), 5).num_shards == 5
    assert "eval_tasks" not in RunSettings.planned()  # grouping eval tasks changes no prediction
    with pytest.raises(ConfigError, match=r"unknown option 'num_shard'; did you mean 'num_shards'\?"):
        NeedleBenchPartitioner(out_dir=str(tmp_path), num_shard=2)
    with pytest.raises(ConfigError, match="overlength"):
        runtime(overlength="drop")
    with pytest.raises(ConfigError, match="num_shards"):
        _settings(ConfigDict(infer=infer), 0)


def _readme_config(folder: Path) -> Path:
    """The README's own config (``my_eval.py``: one vLLM model, ``suite="32k"``, 8 shards), as the README shows it."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"A config of your own \(`my_eval.py`\).*?```python\n(.*?)```", readme, flags=re.S)
    assert 'suite="32k"' in code and "num_shards=8" in code and "vllm_model(" in code
    path = folder / "my_eval.py"
    path.write_text(code, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def readme_plan(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, PlanReport]:
    """``needlebench plan`` of the README's config on a machine showing no GPU (the longest devices line)."""
    path = _readme_config(tmp_path_factory.mktemp("readme"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDA_VISIBLE_DEVICES", "")
        return path, plan_config(str(path))


def test_the_readme_configs_plan_fits_one_screen(
    readme_plan: tuple[Path, PlanReport], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per model its datasets and total, what is shortened grouped by length with the room's reason, the window and
    devices checks and one line per shard, in at most 30 lines; no dataset slice on them."""
    path, report = readme_plan
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert out == format_plan(report) + "\n"
    lines = out.splitlines()
    assert len(lines) == 28 <= 30, out
    (model,) = report.models
    assert (model.samples, model.num_shortened, model.num_skipped, len(model.shards)) == (10350, 575, 0, 8)
    cut = [x for x in lines if x.startswith("  shortened")]
    assert cut == [
        "  shortened to fit the room of 31,680 cl100k tokens (max_seq_len 32,768 - output 1,024 - reserve 64): "
        "length 32000 x575"
    ]
    assert [x.split(":")[0] for x in lines if x.startswith("  shard ")] == [f"  shard {i}" for i in range(8)]
    assert sum(x.startswith("  devices: qwen2.5-7b-instruct asks for 1 GPU per task") for x in lines) == 1
    assert "[0:" not in out and "32000/0" not in out


def test_verbose_and_json_keep_every_slice(readme_plan: tuple[Path, PlanReport]) -> None:
    """Every piece of every shard, as the partitioner cuts them, is on ``--verbose``'s shard lines and in ``--json``."""
    _, report = readme_plan
    (run,) = report.run.models
    slices = [[f"{p.dataset}[{p.start}:{p.end}]" for p in shard.parts] for shard in run.shards]
    verbose = format_plan(report, verbose=True).splitlines()
    shown = [x.split(" output tokens: ", 1)[1].split(", ") for x in verbose if x.startswith("  shard ")]
    assert shown == slices
    data = json.loads(report.to_json())
    assert [s["parts"] for s in data["models"][0]["shards"]] == slices
    assert "32000/0 x10" in "\n".join(verbose)  # and the cut cells per depth


def test_the_verbose_flag(capsys: pytest.CaptureFixture) -> None:
    assert main(["plan", str(ROOT / CONFIG), "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "shard 0: " in out and "needlebench_srt_en_4k[0:" in out and out.count("prompt_tokens: cl100k") == 1


def test_models_asking_for_no_gpu_get_no_devices_line(plan: PlanReport) -> None:
    assert [(m.num_gpus, m.devices, m.devices_stop) for m in plan.models] == [(0, "", False)] * 3
    assert "devices" not in format_plan(plan)


def test_the_adaptive_range_runs_from_the_full_grid_down(plan: PlanReport, capsys: pytest.CaptureFixture) -> None:
    """``needlebench plan --adaptive``: per model, the full grid is the plan's, and every case the ladder climbs
    (a model that holds the bar everywhere, one that collapses, 60 scripted curves) asks a part of it."""
    from needlebench.commands.adaptive_plan import adaptive_plan

    ranges = {a.model: a for a in adaptive_plan(plan)}
    for m in plan.models:
        cases = {c.case: c for c in ranges[m.abbr].cases}
        full = cases["full grid"]
        assert (full.prompts, full.prompt_tokens, full.share) == (m.samples, m.prompt_tokens, 1.0)
        assert all(0 < c.prompts <= full.prompts and c.share <= 1.0 for c in cases.values())
        assert cases["collapses at 2,000"].prompt_tokens <= cases["holds the bar at every length"].prompt_tokens
        assert cases["median of 60 curves"].prompt_tokens <= cases["p90 of 60 curves"].prompt_tokens
        assert all(c.seconds is None and c.money is None for c in cases.values())  # no rates given
    main(["plan", CONFIG, "--adaptive", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert [a["model"] for a in data["adaptive"]] == [m.abbr for m in plan.models]
    main(["plan", CONFIG, "--adaptive"])
    assert "adaptive (needlebench_mrt_en_4k, needlebench_srt_en_4k" in capsys.readouterr().out
