"""An adaptive run through the real ``opencompass``: rounds in the plan, parts after parts, the tables' "not sampled",
the ladder's effective length, a killed run resumed asking nothing twice, and ``needlebench verify`` replaying
every decision (tests/configs/e2e_adaptive.py: a model right below 2,500 prompt tokens, one right everywhere)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import OPENCOMPASS, ROOT, VENV_BIN, kill_when
from rich.console import Console

from needlebench.errors import ConfigError
from needlebench.opencompass.configs import runtime
from needlebench.planning.run import RunPlan
from needlebench.report.status_view import status_view
from needlebench.runfolder.plan_file import PLAN_FILE
from needlebench.runfolder.status import StatusReader

CONFIG = "tests/configs/e2e_adaptive.py"
LENGTHS = (1000, 2000, 3000)
PER_LENGTH = 20  # 5 depths x 4 repeats
# the full grid's effective lengths: "cut" is right below 2,500 tokens, "right" everywhere
FULL_GRID = {"cut": ("2000", "exact"), "right": ("3000", "at_least")}


def _env(delay: float = 0.0) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT / "tests"), str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "NEEDLEBENCH_TEST_DELAY": str(delay)}


def _needlebench_run(work: Path, *extra: str, shards: int = 1) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(VENV_BIN / "needlebench"), "run", CONFIG, "-w", str(work), *extra],
        cwd=ROOT,
        env={**_env(), "NEEDLEBENCH_TEST_SHARDS": str(shards)},
        capture_output=True,
        text=True,
        timeout=900,
    )


def _plan(run: Path) -> RunPlan:
    return RunPlan.from_dict(json.loads((run / PLAN_FILE).read_text(encoding="utf-8")))


def _table(run: Path, name: str) -> list[dict[str, str]]:
    return list(csv.DictReader((run / "summary" / f"{name}.csv").open(encoding="utf-8")))


def _answered(run: Path, model: str) -> list[str]:
    """Every sample id the model's request log holds (one line per answered batch, each answer once)."""
    lines = (run / "predictions" / model / "needlebench_costs.jsonl").read_text(encoding="utf-8").splitlines()
    return [sid for line in lines if line.strip() for sid in json.loads(line)["costs"]]


@pytest.fixture(scope="module")
def adaptive_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`opencompass CONFIG` runs the first round and prints the command that continues; the second round is killed
    mid-inference; `needlebench run -r` finishes it and every later round."""
    work = tmp_path_factory.mktemp("adaptive")
    first = subprocess.run(
        [*OPENCOMPASS, CONFIG, "-w", str(work)], cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=900
    )
    assert first.returncode == 0, first.stderr[-3000:]
    (run,) = [p for p in work.iterdir() if p.is_dir()]
    said = first.stdout + first.stderr
    assert "adaptive run: the ladder asks 24 more prompts (cut: 12, right: 12); continue it: needlebench run" in said
    assert f"-r {run.name}" in said and len(_plan(run).models[0].rounds) == 1
    # `needlebench status` between rounds: not finished, each model's next round and the command with --adaptive
    between = StatusReader(run).read()
    assert (between.state, between.stage) == ("stopped", "next round")
    assert {m.abbr: m.next_round for m in between.models} == {"cut": 12, "right": 12}
    assert {(d.planned, d.grid) for m in between.models for d in m.datasets} == {(12, PER_LENGTH * len(LENGTHS))}
    assert "cut: the ladder's next round asks 12 prompts (adaptive run)" in between.left()
    (command,) = between.commands
    assert command.endswith(f"-r {run.name} --adaptive")
    second = subprocess.Popen(
        [*OPENCOMPASS, CONFIG, "-w", str(work), "-r", run.name],
        cwd=ROOT,
        env=_env(delay=0.5),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    kill_when(work, second, "*/predictions/*/tmp_*.jsonl")  # a part of the second round is half done
    assert all(len(m.rounds) == 2 for m in _plan(run).models)
    done = _needlebench_run(work, "-r", run.name)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "every model's ladder is decided" in done.stdout + done.stderr
    after = StatusReader(run).read()  # decided: finished, nothing left, the rounds' asks against the full grid
    assert (after.state, after.stage, after.commands, after.left()) == ("finished", "done", (), [])
    assert {m.next_round for m in after.models} == {0}
    shown = Console(width=200, record=True)
    shown.print(status_view(after))
    assert f"40/40 (100%) of a grid of {PER_LENGTH * len(LENGTHS)} (adaptive)" in shown.export_text()
    return run


def _check_rounds(run: Path) -> None:
    """Each model's rounds: the sparse first round, then rounds that each ask prompts no round asked before, all
    answered once; the parts of every round numbered after the earlier rounds', so every file keeps its name."""
    plan = _plan(run)
    for model in plan.models:
        assert len(model.rounds) >= 2 and [r.index for r in model.rounds] == list(range(len(model.rounds)))
        first = model.rounds[0].asks["needlebench_srt_en_4k"]
        assert len(first) == 4 * len(LENGTHS) and model.rounds[0].reasons["needlebench_srt_en_4k"].startswith("first")
        asked = [s for r in model.rounds for s in r.asks["needlebench_srt_en_4k"]]
        assert len(asked) == len(set(asked)) < PER_LENGTH * len(LENGTHS)
        answered = _answered(run, model.abbr)
        assert sorted(answered) == sorted(asked)  # every prompt asked was answered, once
        numbers = sorted(p.number for s in model.shards for p in s.parts)
        assert numbers == list(range(len(numbers)))
        files = sorted((run / "predictions" / model.abbr).glob("needlebench_srt_en_4k_*.json"))
        assert len(files) == len(numbers)
        rows = sum(len(json.loads(f.read_text(encoding="utf-8"))) for f in files)
        assert rows == len(asked)


@pytest.mark.e2e
def test_an_adaptive_run_asks_in_rounds_resumes_a_killed_round_and_finds_the_full_grids_effective_length(
    adaptive_run: Path,
) -> None:
    """Killed mid-round and resumed, the run asked each prompt once (its request log), in rounds whose parts keep
    their files' names, and found the effective length the full grid gives."""
    run = adaptive_run
    _check_rounds(run)
    effective = {r["model"]: r for r in _table(run, "needlebench_effective_length")}
    for model, (length, edge) in FULL_GRID.items():
        assert (effective[model]["effective_length"], effective[model]["edge"]) == (length, edge)
        assert effective[model]["effective"].endswith("(adaptive)")
    spent = {r["model"]: r for r in _table(run, "needlebench_adaptive")}
    for model in FULL_GRID:
        row = spent[model]
        assert int(row["prompts"]) < int(row["full grid prompts"]) == PER_LENGTH * len(LENGTHS)
        assert 0 < float(row["share of tokens"]) < 1 and row["replayed"] == "yes"
    # every cell: its planned samples are the full grid's; scored + not sampled add up to them; never a 0 for those
    summary = [r for r in _table(run, "needlebench_summary") if r["length"] != "all"]
    assert summary
    for row in summary:
        for model in FULL_GRID:
            planned, scored, unsampled = (int(row[f"{model} {k}"]) for k in ("planned", "scored", "not_sampled"))
            assert planned == PER_LENGTH and scored + unsampled == planned and scored >= 4
            if unsampled:
                assert f"{unsampled} of {planned} not sampled (adaptive run)" in row[f"{model} note"]
                assert row[f"{model} complete"] == "False"
            if model == "right":  # right on every prompt asked: the unsampled ones are not averaged in as 0
                assert float(row[model]) == 100.0
    # OpenCompass's own summary: the full grid planned, the prompts asked scored, every sample a record
    summary_csv = sorted((run / "summary").glob("summary_*.csv"))[-1]  # one per round: the last
    rows = {r["metric"]: r for r in csv.DictReader(summary_csv.open(encoding="utf-8"))}
    scored = {m: int(r["prompts"]) for m, r in spent.items()}
    for model, (length, edge) in FULL_GRID.items():
        assert rows["samples planned"][model] == str(PER_LENGTH * len(LENGTHS))
        assert rows["samples scored"][model] == str(scored[model])
        # the result file's (and so OpenCompass's row's) effective length is the ladder's, as the table's
        assert rows["effective length (tokens)"][model] == length
        result = json.loads((run / "results" / model / "needlebench_srt_en_4k.json").read_text(encoding="utf-8"))
        assert result["effective_length"] == float(length)
        interval = (result["effective_length_ci_low"], result["effective_length_ci_high"])
        assert interval == (float(effective[model]["ci_low"]), float(effective[model]["ci_high"]))
        assert result["effective_length_at_least"] == float(edge == "at_least")
        lines = (run / "results" / model / "needlebench_srt_en_4k.samples.jsonl").read_text(encoding="utf-8")
        states = [json.loads(x).get("unscored") for x in lines.splitlines()]
        assert len(states) == PER_LENGTH * len(LENGTHS) and states.count("not_sampled") == len(states) - scored[model]


@pytest.mark.e2e
def test_verify_replays_the_decisions_and_fails_on_an_edited_one(adaptive_run: Path, tmp_path: Path) -> None:
    """The run's results.json (its summary's) carries each decision; verify decides them again from the records
    and fails on an edited one; the leaderboard never sets the run beside full-grid rows as comparable."""
    from needlebench.report.bundle import verify_bundle
    from needlebench.report.leaderboard import measured_rows
    from needlebench.report.results import load_results

    run = adaptive_run
    bundle = run / "summary" / "results.json"
    data = json.loads(bundle.read_text(encoding="utf-8"))
    decisions = {d["model"]: d for d in data["adaptive"]}
    assert (decisions["cut"]["effective_length"], decisions["cut"]["edge"]) == (2000, "exact")
    assert decisions["cut"]["rungs"][-1]["status"] == "fail" and decisions["right"]["replay"] is None
    found = verify_bundle(bundle, run)  # what `needlebench verify` runs
    assert found.ok, found.failures
    decisions["cut"]["effective_length"] = 3000  # the decision edited
    edited = tmp_path / "results.json"
    edited.write_text(json.dumps(data), encoding="utf-8")
    bad = subprocess.run(
        [str(VENV_BIN / "needlebench"), "verify", str(edited), str(run)], capture_output=True, text=True, timeout=600
    )
    assert bad.returncode != 0 and "adaptive" in bad.stdout + bad.stderr
    rows = {r.model: r for r in measured_rows(load_results([run]), run.name)}
    for model in FULL_GRID:  # never set beside full-grid rows as comparable
        said = rows[model].comparability
        assert said is not None and not said.comparable and any("adaptive run (" in x for x in said.differs)


@pytest.mark.e2e
def test_a_replan_keeps_every_answer_and_decides_the_same_rounds(adaptive_run: Path, tmp_path: Path) -> None:
    """A finished adaptive run re-planned under another shard count (``--replan``) asks nothing again: the new
    plan's rounds are decided again from the answers it carried, each the round it was, and the effective
    lengths are the same."""
    copy = tmp_path / "work" / adaptive_run.name
    shutil.copytree(adaptive_run, copy)
    done = _needlebench_run(copy.parent, "-r", copy.name, "--replan", shards=2)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "re-planning this run" in said and "every model's ladder is decided" in said
    before, after = _plan(adaptive_run), _plan(copy)
    assert after.settings.num_shards == 2
    for old, new in zip(before.models, after.models, strict=True):
        assert [r.asks for r in new.rounds] == [r.asks for r in old.rounds]
        assert _answered(copy, new.abbr) == _answered(adaptive_run, old.abbr)  # no prompt asked again
    effective = {r["model"]: (r["effective_length"], r["edge"]) for r in _table(copy, "needlebench_effective_length")}
    assert effective == FULL_GRID


def test_a_resume_whose_ladder_would_take_other_bounds_stops_naming_it(tmp_path: Path) -> None:
    """Every round so far was bounded as the stored grid says; a config whose scores are now graded (Levenshtein)
    gives another plan, named per model and dataset, which a resume stops on (``--replan`` decides again)."""
    from needlebench.commands.plan import plan_config
    from needlebench.runfolder.plan_diff import plan_changes

    edited = tmp_path / "levenshtein.py"
    edited.write_text((ROOT / CONFIG).read_text().replace("repeats=4\n", 'repeats=4, metric="levenshtein"\n'))
    changed = plan_changes(plan_config(CONFIG).run, plan_config(str(edited)).run)
    assert changed == [
        f"{m} / needlebench_srt_en_4k: the ladder's bounds for right-or-wrong scores -> for any score"
        for m in FULL_GRID
    ]


def test_an_adaptive_option_the_ladder_does_not_know_is_refused_naming_the_nearest() -> None:
    with pytest.raises(ConfigError, match="adaptive: unknown option 'dleta'; did you mean 'delta'"):
        runtime(adaptive=dict(dleta=0.05))
    with pytest.raises(ConfigError, match="adaptive first"):
        runtime(adaptive=dict(first=0))
    infer, _ = runtime(adaptive=dict(delta=0.05, extend=[2000000]))
    assert infer["partitioner"]["adaptive"] == {"delta": 0.05, "extend": [2000000]}


SMOLLM2 = "tests/configs/e2e_adaptive_smollm2.py"


@pytest.mark.methods
def test_on_smollm2_plain_and_pressed_the_adaptive_and_full_grid_effective_lengths_agree(tmp_path: Path) -> None:
    """The bundled SmolLM2, plain and under SnapKV at 0.5, S-RT English 1k-8k: the full grid, then the same config
    adaptive. Each model's adaptive effective length is the full grid's, or inside the full grid's interval; the
    prompts it spent are reported (needlebench_adaptive.csv, printed here)."""
    runs = {}
    for name, flag in (("full", "0"), ("adaptive", "1")):
        work = tmp_path / name
        done = subprocess.run(
            [str(VENV_BIN / "needlebench"), "run", SMOLLM2, "-w", str(work)],
            cwd=ROOT,
            env={**_env(), "NEEDLEBENCH_TEST_ADAPTIVE": flag},
            capture_output=True,
            text=True,
            timeout=5400,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        (runs[name],) = [p for p in work.iterdir() if p.is_dir()]
    full = {r["model"]: r for r in _table(runs["full"], "needlebench_effective_length")}
    adaptive = {r["model"]: r for r in _table(runs["adaptive"], "needlebench_effective_length")}
    spent = {r["model"]: r for r in _table(runs["adaptive"], "needlebench_adaptive")}
    assert set(full) == set(adaptive) == set(spent) and len(full) == 2
    for model, row in full.items():
        # a length, 0 for "below the shortest" (an empty interval end or no effective length)
        got, low, high = (int(x or 0) for x in (adaptive[model]["effective_length"], row["ci_low"], row["ci_high"]))
        same = (adaptive[model]["effective_length"], adaptive[model]["edge"]) == (row["effective_length"], row["edge"])
        assert adaptive[model]["edge"] != "undetermined" and (same or low <= got <= high), (
            model,
            row["effective"],
            adaptive[model]["effective"],
        )
        print(
            f"{model}: full grid {row['effective']}, adaptive {adaptive[model]['effective']}; "
            f"{spent[model]['prompts']} of {spent[model]['full grid prompts']} prompts, "
            f"{float(spent[model]['share of tokens']):.0%} of the prompt tokens"
        )


def test_needlebench_run_adaptive_makes_a_config_adaptive_as_it_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """``needlebench run --adaptive``: the config as OpenCompass loads it (and dumps it into the run) has both
    stages' partitioners adaptive with the ladder's defaults; a config's own ``runtime(adaptive=...)`` wins."""
    from mmengine.config import Config

    from needlebench.launch.driver import adaptive_on_load

    monkeypatch.setattr(Config, "fromfile", Config.__dict__["fromfile"])  # put back after the test
    adaptive_on_load({})
    plain = Config.fromfile(str(ROOT / "tests" / "configs" / "e2e_resume.py"), format_python_code=False)
    assert plain["infer"]["partitioner"]["adaptive"] == {} and plain["eval"]["partitioner"]["adaptive"] == {}
    own = Config.fromfile(str(ROOT / CONFIG), format_python_code=False)
    assert own["infer"]["partitioner"]["adaptive"] == {"seed": 1}
