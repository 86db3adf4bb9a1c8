"""The run folder's wing: a resume reads the stored plan first, and a dataset whose rows changed is named.

OpenCompass's infer partitioner is built as ``opencompass`` builds it, on a config of one S-RT dataset whose
needles come from a file of the test's own and a model whose room is measured with a local tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

import needlebench.planning.limits as limits
import needlebench.runfolder.lifecycle as lifecycle
from needlebench.cache.rows import load_rows
from needlebench.errors import ConfigError
from needlebench.runfolder.plan_file import PLAN_FILE, read_stored
from needlebench.runfolder.request import REQUEST_FILE, RunRequest, read_request, write_request

CONFIG = """
_base_ = []  # a plain config, not mmengine's lazy-import one

from needlebench.opencompass.configs import needlebench_datasets, runtime

datasets = needlebench_datasets(
    suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[0, 100], repeats=1,
    srt=dict(needle_file={needles!r}),
)
models = [dict(type="opencompass.models.HuggingFacewithChatTemplate", abbr="m", path={tokenizer!r},
               max_seq_len=4000, max_out_len=16, batch_size=2)]
infer, eval = runtime(num_shards=2)
"""


def _tokenizer(folder: Path) -> Path:
    """A local tokenizer folder (words split on whitespace): planning loads it to measure the model's room."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(str(folder))
    return folder


def _infer(config: Path, run: Path) -> list:
    """The infer partitioner on ``config`` into run folder ``run``, as ``opencompass`` builds it; its tasks."""
    from mmengine.config import Config

    from needlebench.opencompass.partitioner import NeedleBenchPartitioner

    cfg = Config.fromfile(str(config))
    cfg["work_dir"] = str(run)
    settings = dict(cfg["infer"]["partitioner"])
    settings.pop("type")
    return NeedleBenchPartitioner(out_dir=str(run / "predictions"), **settings)(cfg)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often planning ran and loaded a tokenizer (the real functions, counted)."""
    calls = {"plan_run": 0, "load_tokenizer": 0}

    def counting(name: str, real):  # noqa: ANN001, ANN202
        def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            calls[name] += 1
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(lifecycle, "plan_run", counting("plan_run", lifecycle.plan_run))
    monkeypatch.setattr(limits, "load_tokenizer", counting("load_tokenizer", limits.load_tokenizer))
    return calls


def test_a_resume_reads_the_stored_plan_and_a_changed_needle_stops_it_naming_the_dataset(
    tmp_path: Path, counted: dict[str, int]
) -> None:
    """Fresh: planned, the tokenizer loaded. Unchanged resume: the same tasks from the stored plan, no planning
    and no tokenizer. A needle text changed to one of the same token counts: the resume stops before any task,
    naming the dataset; asked to re-plan, it goes on, and the plan's history says what each stage did."""
    needles = tmp_path / "needles.jsonl"
    needles.write_text((ROOT / "needlebench/data/needles/needles_en.jsonl").read_text(encoding="utf-8"))
    config = tmp_path / "config.py"
    config.write_text(CONFIG.format(needles=str(needles), tokenizer=str(_tokenizer(tmp_path / "tok"))))
    run = tmp_path / "work" / "20260101_000000"

    fresh = _infer(config, run)
    assert fresh and counted == {"plan_run": 1, "load_tokenizer": 1}
    stored = read_stored(run)
    assert stored is not None and stored.config_digest and set(stored.fingerprints) == {"needlebench_srt_en_4k"}

    counted.update(plan_run=0, load_tokenizer=0)
    resumed = _infer(config, run)
    assert counted == {"plan_run": 0, "load_tokenizer": 0}
    assert [t["datasets"] for t in resumed] == [t["datasets"] for t in fresh]

    rows = load_rows("srt", **_srt_params(config))
    before = list(rows["prompt_tokens"]), list(rows["budget_tokens"]), list(rows["prompt"])
    used = {json.loads(gold)["needle"] for gold in rows["answer"]}
    records = [json.loads(line) for line in needles.read_text(encoding="utf-8").splitlines()]
    for record in records:  # the needles the rows hold: " the " -> " a ", one cl100k token each
        if record["needle"] in used:
            record["needle"] = record["needle"].replace(" the ", " a ", 1)
    needles.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    rows = load_rows("srt", **_srt_params(config))
    assert list(rows["prompt"]) != before[2]  # the prompts changed ...
    assert (list(rows["prompt_tokens"]), list(rows["budget_tokens"])) == before[:2]  # ... every token count kept
    with pytest.raises(SystemExit) as stop:
        _infer(config, run)
    said = str(stop.value)
    assert "needlebench_srt_en_4k" in said and "rows changed" in said and "--replan" in said, said
    assert counted["load_tokenizer"] == 0  # the config's digest held: only the fingerprints were compared

    write_request(run, RunRequest(replan=True))
    replanned = _infer(config, run)
    assert replanned and not (run / REQUEST_FILE).exists()
    history = json.loads((run / PLAN_FILE).read_text(encoding="utf-8"))["history"]
    assert [h["stage"] for h in history] == ["fresh", "resume", "replan"]
    assert history[-1]["request"]["replan"] is True


def test_a_resume_that_only_adds_rope_scaling_stops_naming_the_window(tmp_path: Path) -> None:
    """The model's folder says its window (4,096, no scaling); a resume whose config adds a YaRN x2 block changes
    no limit and no shard, yet the model answers otherwise: it stops on that one line, before any task, and a
    re-plan goes on with the scaled window in the plan."""
    folder = _tokenizer(tmp_path / "tok")
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 4096}), encoding="utf-8")
    needles = ROOT / "needlebench/data/needles/needles_en.jsonl"
    config = tmp_path / "config.py"
    plain = CONFIG.format(needles=str(needles), tokenizer=str(folder))
    config.write_text(plain)
    run = tmp_path / "work" / "20260101_000000"
    assert _infer(config, run)
    stored = read_stored(run)
    assert stored is not None and stored.plan.models[0].window["usable"] == 4096
    scaled = "batch_size=2, model_kwargs=dict(rope_scaling=dict(rope_type='yarn', factor=2.0)))"
    config.write_text(plain.replace("batch_size=2)", scaled, 1))
    with pytest.raises(SystemExit) as stop:
        _infer(config, run)
    said = str(stop.value)
    assert [line for line in said.splitlines() if line.startswith("  - ")] == [
        "  - m: context window native window 4,096, no RoPE scaling -> scaled window 8,192: yarn x2 of 4,096, the run's"
    ], said
    answered = _answer_first_shard(run, config)
    write_request(run, RunRequest(replan=True))
    assert _infer(config, run)
    stored = read_stored(run)
    assert stored is not None and stored.plan.models[0].window["usable"] == 8192
    assert [h["stage"] for h in stored.history] == ["fresh", "replan"]
    # the unscaled model's answers are another model's: none is carried into the scaled model's run
    assert answered == 1 and _pooled(run) == 0

    # the control: a re-plan that only cuts the shards otherwise carries the same model's answers
    run = tmp_path / "work" / "20260101_000001"
    config.write_text(plain)
    assert _infer(config, run)
    answered = _answer_first_shard(run, config)
    config.write_text(plain.replace("num_shards=2", "num_shards=1"))
    write_request(run, RunRequest(replan=True))
    assert _infer(config, run)
    assert answered == 1 and _pooled(run) == answered


def _answer_first_shard(run: Path, config: Path) -> int:
    """Write the prediction file of the stored plan's first part, each row answered with its gold (as
    OpenCompass's inferencer saves it); how many answers it holds."""
    from needlebench.runfolder.predictions import PROMPT_KEY

    stored = read_stored(run)
    assert stored is not None
    part = stored.plan.models[0].shards[0].parts[0]
    rows = load_rows("srt", **_srt_params(config))
    entries = {
        str(i): {PROMPT_KEY: rows[part.start + i]["prompt"], "prediction": "x", "gold": rows[part.start + i]["answer"]}
        for i in range(part.end - part.start)
    }
    folder = run / "predictions" / "m"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{part.abbr}.json").write_text(json.dumps(entries), encoding="utf-8")
    return len(entries)


def _pooled(run: Path) -> int:
    """The answers a re-plan carried into the new plan (the model's reuse pool)."""
    from needlebench.runfolder.carryover import POOL_FILE

    pool = run / "predictions" / "m" / POOL_FILE
    return len(pool.read_text(encoding="utf-8").splitlines()) if pool.exists() else 0


def _srt_params(config: Path) -> dict:
    """The S-RT dataset's task parameters as the config gives them."""
    from mmengine.config import Config

    from needlebench.tasks import config_params

    (dataset,) = Config.fromfile(str(config))["datasets"]
    return config_params(dataset)


def test_a_request_file_that_is_not_one_is_named(tmp_path: Path) -> None:
    """A request file with an unknown key or a wrong type stops with one message naming the file."""
    assert read_request(tmp_path) == RunRequest()
    (tmp_path / REQUEST_FILE).write_text('{"replan": true, "retry_models": ["a"]}', encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown key.*retry_models"):
        read_request(tmp_path)
    (tmp_path / REQUEST_FILE).write_text('{"retry": "a,b"}', encoding="utf-8")
    with pytest.raises(ConfigError, match=f"{REQUEST_FILE}: retry 'a,b'"):
        read_request(tmp_path)
    request = RunRequest(replan=False, retry=("a",))
    write_request(tmp_path, request)
    assert read_request(tmp_path) == request


def test_no_package_module_reads_a_stage_steering_variable() -> None:
    """Re-plan, retry and batch reach a stage as a typed request, never as an environment variable."""
    names = ("NEEDLEBENCH_REPLAN", "NEEDLEBENCH_RETRY_MODELS", "NEEDLEBENCH_BATCH")
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "needlebench").rglob("*.py"))
        for name in names
        if name in path.read_text(encoding="utf-8")
    ]
    assert not found, found
