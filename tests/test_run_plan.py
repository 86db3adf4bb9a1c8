"""The plan is the run: what ``needlebench plan`` shows is the object the partitioner stores and renders.

For each config, ``plan_config`` (what ``needlebench plan`` prints) and OpenCompass's infer partitioner (built
as ``opencompass`` builds it, on the same config) must give the same ``RunPlan``, field by field, and the
partitioner's tasks must be exactly the plan's shards and pieces. The Slurm run's stored plan is checked
the same way in ``tests/test_slurm.py``.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from conftest import ROOT

from needlebench.commands.plan import plan_config
from needlebench.planning.run import RunPlan
from needlebench.runfolder.plan_file import PLAN_FILE, read_plan

# A model whose context cuts the longer cells of each suite (shortened, as the shipped configs' policy says)
SHORT = """models = [dict(type="opencompass.models.HuggingFacewithChatTemplate", abbr="short", path="org/not-downloaded",
               max_seq_len={max_seq_len}, max_out_len=64, batch_size=8)]
"""
CASES = {
    "tiny": ("configs/eval_needlebench_tiny.py", None),
    "4k, a 3,000-token model": ("configs/eval_needlebench_4k.py", 3000),
    "128k, a 100k model": ("configs/eval_needlebench_128k.py", 100_000),
}


def _partition(config: str, work: Path) -> tuple[list, RunPlan | None]:
    """OpenCompass's infer partitioner on a config, as ``opencompass`` builds it; its tasks and stored plan."""
    from mmengine.config import Config

    from needlebench.opencompass.partitioner import NeedleBenchPartitioner

    cfg = Config.fromfile(config)
    cfg["work_dir"] = str(work)
    settings = dict(cfg["infer"]["partitioner"])
    settings.pop("type")
    tasks = NeedleBenchPartitioner(out_dir=str(work / "predictions"), **settings)(cfg)
    return tasks, read_plan(work)


@pytest.mark.parametrize("case", list(CASES))
def test_needlebench_plan_is_the_plan_the_partitioner_runs(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, max_seq_len = CASES[case]
    if max_seq_len is not None:
        model = tmp_path / "short_model.py"
        model.write_text(SHORT.format(max_seq_len=max_seq_len))
        monkeypatch.setenv("NEEDLEBENCH_MODELS", str(model))
    report = plan_config(str(ROOT / config))
    tasks, stored = _partition(str(ROOT / config), tmp_path / "run")
    assert stored is not None, f"the partitioner stored no {PLAN_FILE}"
    planned = report.run
    assert stored.settings == planned.settings
    assert [m.abbr for m in stored.models] == [m.abbr for m in planned.models]
    for ours, theirs in zip(stored.models, planned.models, strict=True):
        for field in dataclasses.fields(ours):  # field by field, so a failure names the one that differs
            assert getattr(ours, field.name) == getattr(theirs, field.name), (ours.abbr, field.name)
    assert stored == planned
    if max_seq_len is not None:  # the model's context cut cells, and the plan says which
        assert any(m.overlength for m in planned.models), case
    # the tasks are the plan's shards, piece by piece, in the order they send them
    rendered = [
        [(d["abbr"], (d.get("reader_cfg") or {}).get("test_range")) for d in task["datasets"][0]] for task in tasks
    ]
    expected = [
        [(p.abbr, None if p.number is None else f"[{p.start}:{p.end}]") for p in shard.parts]
        for run in planned.models
        for shard in run.shards
    ]
    assert rendered == expected
    # and `needlebench plan`'s shard lines are the same pieces
    shown = [s.parts for m in report.models for s in m.shards]
    assert shown == [
        [f"{p.dataset}[{p.start}:{p.end}]" for p in shard.parts] for run in planned.models for shard in run.shards
    ]


def test_the_stage_check_reads_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    """The summarizer's stage check on a run with missing and cut prediction files: it reports, it repairs nothing."""
    from mmengine.config import Config

    from needlebench.runfolder.stopped import check_stages

    config = str(ROOT / CASES["tiny"][0])
    work = tmp_path / "run"
    tasks, plan = _partition(config, work)
    assert plan is not None
    folder = work / "predictions" / plan.models[0].abbr
    folder.mkdir(parents=True)
    pieces = [p.abbr for s in plan.models[0].shards for p in s.parts]
    (folder / f"{pieces[0]}.json").write_text('{\n    "0": {', encoding="utf-8")  # cut short by a kill
    (folder / "tmp_x.jsonl").write_text('{"a": 1}\n{"b"', encoding="utf-8")
    before = {p: p.read_bytes() for p in work.rglob("*") if p.is_file()}
    cfg = Config.fromfile(config)
    check_stages(work, [m["abbr"] for m in cfg["models"]], list(cfg["datasets"]))  # no limit was hit: a warning
    after = {p: p.read_bytes() for p in work.rglob("*") if p.is_file()}
    assert after == before
    assert os.path.getsize(folder / "tmp_x.jsonl") == len('{"a": 1}\n{"b"')
