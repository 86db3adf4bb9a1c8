"""Token-aware shards, the prefix-friendly order, and over-length handling per model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from needlebench.cache.rows import load_rows
from needlebench.opencompass.configs import needlebench_datasets
from needlebench.opencompass.partitioner import NeedleBenchPartitioner
from needlebench.planning.shards import shard_ranges
from needlebench.report.html import build_report
from needlebench.runfolder.plan_file import PLAN_FILE, read_plan
from needlebench.tasks import config_params

MODEL = dict(
    type="opencompass.models.HuggingFacewithChatTemplate",
    abbr="m",
    path="/nonexistent",
    max_seq_len=200_000,
    max_out_len=256,
    batch_size=1,
)


def _partition(datasets: list[dict], tmp_path: Path, model: dict = MODEL, **kwargs) -> list:
    part = NeedleBenchPartitioner(out_dir=str(tmp_path / "predictions"), **kwargs)
    return part.partition(
        [{"models": [model], "datasets": datasets}], work_dir=str(tmp_path), out_dir=str(tmp_path / "predictions")
    )


def _dataset_of(chunk: dict) -> str:
    """The dataset a task's chunk comes from: a part ``abbr_N`` (it has a ``test_range``) or the whole."""
    return chunk["abbr"].rsplit("_", 1)[0] if chunk["reader_cfg"].get("test_range") else chunk["abbr"]


def test_sharding_core_balances_and_covers() -> None:
    costs = [1000] * 50 + [128000] * 10 + [4000] * 300
    ranges = shard_ranges(costs, 8)
    assert len(ranges) == 8 and ranges[0][0] == 0 and ranges[-1][1] == len(costs)
    assert all(a < b for a, b in ranges) and all(r[1] == s[0] for r, s in zip(ranges, ranges[1:]))
    # balanced: each cut is the prefix position closest to its ideal total, so no shard is further from the mean
    # than the largest item (a cut cannot fall inside an item)
    mean = sum(costs) / 8
    totals = [sum(costs[a:b]) for a, b in ranges]
    assert all(abs(t - mean) <= max(costs) for t in totals), (totals, mean)
    assert shard_ranges([], 4) == [] and shard_ranges([5], 4) == [(0, 1)]


def test_128k_suite_shards_are_balanced_and_cover_every_sample(tmp_path: Path) -> None:
    datasets = needlebench_datasets(suite="128k", repeats=1)
    tasks = _partition(datasets, tmp_path, num_shards=8)
    assert len(tasks) == 8
    tokens = []
    seen: dict[str, list[int]] = {}
    for task in tasks:
        total = 0
        for chunk in task["datasets"][0]:
            rows = load_rows(chunk["task"], **config_params(chunk))
            start, end = 0, len(rows)
            if chunk["reader_cfg"].get("test_range"):
                start, end = (int(x) for x in chunk["reader_cfg"]["test_range"].strip("[]").split(":"))
            seen.setdefault(_dataset_of(chunk), []).extend(range(start, end))
            metas = [json.loads(m) for m in rows["meta"][start:end]]
            total += sum(m["prompt_tokens"] + 256 for m in metas)  # prompt plus output budget
            # order inside a chunk, within a repeat: the first needle's position in the document, farthest
            # first (prompts sharing a prefix follow each other); M-RT's first needle is always at 0
            keys = [(m["repeat"], -(m.get("depth") or 0) * (m["length"] - m["buffer"]), -m["length"]) for m in metas]
            assert keys == sorted(keys)
        tokens.append(total)
    mean = sum(tokens) / len(tokens)
    assert max(abs(t - mean) for t in tokens) <= 0.10 * mean, tokens
    for d in datasets:
        n = len(load_rows(d["task"], **config_params(d)))
        assert sorted(seen[d["abbr"]]) == list(range(n)), d["abbr"]


def _short_model(max_seq_len: int) -> dict:
    return {**MODEL, "max_seq_len": max_seq_len, "max_out_len": 100}


# where the question starts, after the document (question_position="end")
QUESTION_MARKER = {
    "reference": ("now please answer: ",),
    "clarified": ("Question: ", "Answer each of the following questions"),  # S-RT / M-RS, M-RT
}


@pytest.mark.parametrize("protocol", ["reference", "clarified"])
@pytest.mark.parametrize("policy", ["shorten", "skip"])
def test_overlength_prompts_are_shortened_or_skipped_and_reported(tmp_path: Path, policy: str, protocol: str) -> None:
    datasets = needlebench_datasets(
        protocol=protocol,
        suite="4k",
        tasks=["srt", "mrt", "mrs"],  # M-RT once crashed under "skip" (its loop did not catch SkipSample)
        langs=["en"],
        lengths=[1000, 2000, 4000],
        depths=[0, 50, 100],
        repeats=1,
        max_out_len=100,
    )
    model = _short_model(3000)
    tasks = _partition(datasets, tmp_path, model=model, num_shards=1, overlength=policy)
    eval_tasks = _partition(datasets, tmp_path, model=model, stage="eval", overlength=policy)
    room = 3000 - 100 - 64
    infer = {}  # dataset -> its first infer chunk (S-RT and M-RS come interleaved, in parts)
    for chunk in tasks[0]["datasets"][0]:
        infer.setdefault(_dataset_of(chunk), chunk)
    assert len(infer) == len(eval_tasks)
    for eval_task in eval_tasks:
        eval_chunk = eval_task["datasets"][0][0]
        infer_chunk = infer[eval_chunk["abbr"]]
        assert infer_chunk["max_prompt_tokens"] == eval_chunk["max_prompt_tokens"] == room
        rows = load_rows(infer_chunk["task"], **config_params(infer_chunk))
        assert len(rows) == len(load_rows(eval_chunk["task"], **config_params(eval_chunk)))
        metas = [json.loads(m) for m in rows["meta"]]
        assert all(m["prompt_tokens"] <= room for m in metas)
        long = [(m, rows[i]) for i, m in enumerate(metas) if m["length"] == 4000]
        if policy == "skip":
            assert not long
        else:
            assert long and all(m["shortened_from"] > room for m, _ in long)
            for _, row in long:  # question and needles survive
                gold = json.loads(row["answer"])
                # S-RT: the needle; M-RT: every needle; M-RS: every person of the kinship chain
                if "needle" in gold:
                    needles = [gold["needle"]]
                else:
                    needles = gold.get("chain_names") or [n["needle"] for n in gold["needles"]]
                assert needles and all(n in row["prompt"] for n in needles)
                tail = row["prompt"].rsplit("</Document>", 1)[1]
                assert any(marker in tail for marker in QUESTION_MARKER[protocol]), tail
        # every prompt that fits is kept whole: the 1,000-token rows are the unlimited dataset's
        (whole,) = [d for d in datasets if d["abbr"] == eval_chunk["abbr"]]
        unlimited = [json.loads(m) for m in load_rows(whole["task"], **config_params(whole))["meta"]]
        assert [m for m in metas if m["length"] == 1000] == [m for m in unlimited if m["length"] == 1000]
    info = read_plan(tmp_path).model("m").overlength["needlebench_srt_en_4k"]  # type: ignore[union-attr]
    assert info["policy"] == policy and info["max_prompt_tokens"] == room
    assert (info["num_skipped"] if policy == "skip" else info["num_shortened"]) == 3
    # the report shows it
    run = tmp_path / "run"
    (run / "results" / "m").mkdir(parents=True)
    (run / "results" / "m" / "needlebench_srt_en_4k.samples.jsonl").write_text(
        json.dumps(
            {"id": "a", "task": "srt", "lang": "en", "length": 1000, "depth": 0, "score": 100.0, "correct": True}
        )
        + "\n"
    )
    (run / PLAN_FILE).write_text((tmp_path / PLAN_FILE).read_text())
    page = build_report([run]).read_text()
    assert "overlength" in page and policy in page


def test_missing_max_seq_len_warns_and_uses_a_safe_default(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    datasets = needlebench_datasets(suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[50], repeats=1)
    model = {k: v for k, v in MODEL.items() if k != "max_seq_len"}
    part = NeedleBenchPartitioner(out_dir=str(tmp_path / "p"))
    messages: list[str] = []
    part.logger.warning = messages.append  # OpenCompass's logger does not propagate to caplog
    tasks = part.partition(
        [{"models": [model], "datasets": datasets}], work_dir=str(tmp_path), out_dir=str(tmp_path / "p")
    )
    assert tasks[0]["datasets"][0][0]["max_prompt_tokens"] == 32768 - 256 - 64
    assert any("max_seq_len" in m for m in messages)


def _broken_tokenizer_model(tmp_path: Path) -> dict:
    folder = tmp_path / "broken-model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "tokenizer_config.json").write_text('{"tokenizer_class": "LlamaTokenizerFast"')  # cut short
    (folder / "tokenizer.json").write_text("not a tokenizer")
    return {**_short_model(3000), "abbr": "broken", "path": str(folder)}


def _small_srt() -> list[dict]:
    return needlebench_datasets(suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[50], repeats=1)


def _stage(tmp_path: Path, model: dict, stage: str) -> tuple[list, list[str]]:
    part = NeedleBenchPartitioner(out_dir=str(tmp_path / "predictions"), stage=stage)
    messages: list[str] = []
    part.logger.warning = messages.append  # OpenCompass's logger does not propagate to caplog
    tasks = part.partition(
        [{"models": [model], "datasets": _small_srt()}], work_dir=str(tmp_path), out_dir=str(tmp_path / "predictions")
    )
    return tasks, messages


def test_broken_tokenizer_is_a_recorded_warning_and_both_stages_agree(tmp_path: Path) -> None:
    model = _broken_tokenizer_model(tmp_path)
    infer, messages = _stage(tmp_path, model, "infer")
    assert any(model["path"] in m and "failed to load" in m for m in messages), messages
    record = read_plan(tmp_path).model("broken").limits["needlebench_srt_en_4k"]  # type: ignore[union-attr]
    assert record.tokenizer == model["path"] and record.tokenizer_error
    assert record.tokenizer_ratio == 1.0 and record.max_prompt_tokens == 3000 - 100 - 64
    evals, _ = _stage(tmp_path, model, "eval")
    assert infer[0]["datasets"][0][0]["max_prompt_tokens"] == evals[0]["datasets"][0][0]["max_prompt_tokens"]


class _DoubleTokenizer:
    """Two model tokens per character: a ratio far above 1."""

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": [0] * (2 * len(text))}


def test_eval_stage_uses_the_infer_decision_instead_of_measuring_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from needlebench.planning import limits as planning

    model = _broken_tokenizer_model(tmp_path)
    infer, _ = _stage(tmp_path, model, "infer")
    # the tokenizer loads by eval time (or behaves differently there): the decision must not change
    monkeypatch.setattr(planning, "load_tokenizer", lambda m: (_DoubleTokenizer(), m["path"], None))
    evals, messages = _stage(tmp_path, model, "eval")
    assert evals[0]["datasets"][0][0]["max_prompt_tokens"] == infer[0]["datasets"][0][0]["max_prompt_tokens"]
    assert not messages
    # no infer record at all (an eval-only run of an old work dir): measured now, with a warning
    (tmp_path / PLAN_FILE).unlink()
    evals, messages = _stage(tmp_path, model, "eval")
    assert evals[0]["datasets"][0][0]["max_prompt_tokens"] < infer[0]["datasets"][0][0]["max_prompt_tokens"]
    assert any(PLAN_FILE in m for m in messages)


# The summarizer is the last OpenCompass stage; its failures must reach OpenCompass's exit status.
def test_summarizer_raises_when_our_report_fails_after_the_default_summary(tmp_path: Path) -> None:
    from mmengine.config import ConfigDict

    from needlebench.errors import ConfigError
    from needlebench.opencompass.summarizer import NeedleBenchSummarizer

    run = tmp_path / "20250101_000000"
    for model, version in (("a", "1.0"), ("b", "2.0")):  # mixed dataset versions: our report refuses
        (run / "results" / model).mkdir(parents=True)
        row = {"id": "a", "task": "srt", "lang": "en", "length": 1000, "depth": 0, "score": 100.0, "version": version}
        (run / "results" / model / "needlebench_srt_en_4k.samples.jsonl").write_text(json.dumps(row) + "\n")
    models = [{**MODEL, "abbr": "a"}, {**MODEL, "abbr": "b"}]
    cfg = ConfigDict({"models": models, "datasets": _small_srt(), "work_dir": str(run)})
    summarizer = NeedleBenchSummarizer(cfg)
    with pytest.raises(ConfigError, match="mix dataset versions"):
        summarizer.summarize(time_str="20250101_000000")
    assert list((run / "summary").glob("summary_20250101_000000.*"))  # OpenCompass's own summary came first


def test_an_unwritable_cache_still_partitions_with_rows_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The partitioner's up-front build needs the cache; without one, tasks build their rows in memory."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("NEEDLEBENCH_CACHE", str(blocker / "cache"))  # mkdir fails: a file is in the way
    datasets = needlebench_datasets(suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[0, 100], repeats=1)
    tasks = _partition(datasets, tmp_path, num_shards=1)
    (chunk,) = tasks[0]["datasets"][0]
    rows = load_rows(chunk["task"], **config_params(chunk))
    assert len(rows) == 2 and not rows.cache_files  # in memory, nothing written


def test_resume_cuts_the_remaining_work_as_the_first_run_did(tmp_path: Path) -> None:
    """After a shard failed, a resume plans the same pieces: an existing part file holds exactly the
    rows the new plan gives that part (re-cutting only what is left would duplicate or drop rows)."""
    datasets = needlebench_datasets(
        suite="4k", tasks=["srt", "mrt"], langs=["en"], lengths=[1000], depths=[0, 50, 100], repeats=1
    )
    first = _partition(datasets, tmp_path, num_shards=3)
    chunks = {c["abbr"]: c["reader_cfg"].get("test_range") for t in first for c in t["datasets"][0]}
    split = sorted(a for a, r in chunks.items() if r)
    assert len(first) == 3 and len(split) >= 2  # a dataset cut in parts, and more than one shard
    folder = tmp_path / "predictions" / "m"
    folder.mkdir(parents=True)
    failed = split[0]  # this shard's job was cancelled; every other piece was written
    for abbr in chunks:
        if abbr != failed:
            (folder / f"{abbr}.json").write_text("{}")
    again = _partition(datasets, tmp_path, num_shards=3)
    assert [(c["abbr"], c["reader_cfg"].get("test_range")) for t in again for c in t["datasets"][0]] == [
        (failed, chunks[failed])
    ]


def test_eval_stage_groups_a_models_datasets_into_eval_workers_tasks() -> None:
    """One eval task (one OpenCompass import, one Slurm job) per group of datasets, in order, none lost."""
    from needlebench.runfolder.lifecycle import eval_groups

    datasets = [{"abbr": f"d{i}"} for i in range(5)]
    grouped = eval_groups(datasets, 2)
    assert len(grouped) == 2 and [d for g in grouped for d in g] == datasets
    assert sorted(len(g) for g in grouped) == [2, 3]
    assert eval_groups(datasets, 0) == [[d] for d in datasets] == eval_groups(datasets, 9)


def test_a_runs_eval_tasks_span_its_models(tmp_path: Path) -> None:
    """Three models, two eval tasks in all (not two each): every (model, dataset) pair once, in config order,
    each task naming each of its models once with that model's datasets."""
    datasets = needlebench_datasets(
        suite="4k", tasks=["srt", "mrt"], langs=["en"], lengths=[1000], depths=[0], repeats=1
    )
    models = [{**MODEL, "abbr": f"m{i}"} for i in range(3)]
    part = NeedleBenchPartitioner(out_dir=str(tmp_path / "results"), stage="eval", eval_tasks=2)
    tasks = part.partition(
        [{"models": models, "datasets": datasets}], work_dir=str(tmp_path), out_dir=str(tmp_path / "results")
    )
    assert len(tasks) == 2
    pairs = [(m["abbr"], d["abbr"]) for t in tasks for m, ds in zip(t["models"], t["datasets"]) for d in ds]
    assert pairs == [(m["abbr"], d["abbr"]) for m in models for d in datasets]
    assert all(len({m["abbr"] for m in t["models"]}) == len(t["models"]) for t in tasks)
    assert [m["abbr"] for m in tasks[0]["models"]] == ["m0", "m1"] and [m["abbr"] for m in tasks[1]["models"]] == [
        "m1",
        "m2",
    ]


def test_api_models_keep_the_openai_client_reserve() -> None:
    """OpenCompass's OpenAI client trims or refuses a prompt within 100 tokens of max_seq_len - output."""
    from needlebench.planning.limits import OPENAI_CLIENT_RESERVE, model_room

    local = {"abbr": "m", "max_seq_len": 1500, "max_out_len": 16}
    api = {**local, "openai_api_base": "http://127.0.0.1:1/v1"}
    assert model_room(local, {}, 64) == (1500, 1500 - 16 - 64)
    assert model_room(api, {}, 64) == (1500, 1500 - 16 - OPENAI_CLIENT_RESERVE)
    assert model_room(api, {}, 200) == (1500, 1500 - 16 - 200)  # a larger margin still wins


def test_an_unreadable_plan_is_logged_not_swallowed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A missing plan is normal (an eval-only run of an older work dir); a corrupt one is named in a warning."""
    with caplog.at_level("WARNING", logger="needlebench.planning.run"):
        assert read_plan(tmp_path) is None
        assert not caplog.records
        (tmp_path / PLAN_FILE).write_text("{not json", encoding="utf-8")
        assert read_plan(tmp_path) is None
    assert [r.levelname for r in caplog.records] == ["WARNING"] and PLAN_FILE in caplog.records[0].getMessage()


def test_interleave_keeps_each_datasets_order_and_sends_a_shared_haystack_together() -> None:
    """The stream is a merge: every row once, each dataset in its own order; rows of one haystack group
    alternate by needle position (farthest first), at least ``min_run`` of a dataset at a time after the
    group's lead; a
    dataset whose opening differs, or without groups, stays one run."""
    from needlebench.planning.stream import interleave

    srt = [("h0", 900.0), ("h0", 500.0), ("h0", 100.0), ("h1", 900.0), ("h1", 100.0)]
    mrs = [("h0", 800.0), ("h0", 400.0), ("h1", 950.0), ("h1", 50.0)]
    mrt = [("h0", 0.0), ("h1", 0.0)]  # same haystack, different opening: no sharing
    atc = [(None, 0.0)] * 3
    heads = ["head A", "head A", "head B", "head C"]
    stream = interleave([srt, mrs, mrt, atc], heads)
    assert sorted(stream) == sorted((di, ri) for di, d in enumerate([srt, mrs, mrt, atc]) for ri in range(len(d)))
    for di in range(4):
        assert [ri for d, ri in stream if d == di] == sorted(ri for d, ri in stream if d == di)
    assert stream[:9] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (0, 4), (1, 3)]
    assert stream[9:] == [(2, 0), (2, 1), (3, 0), (3, 1), (3, 2)]
    # a batch of 2: a group's farthest needle goes alone (the lead the batches after it reuse), then each
    # dataset sends two rows of the group once picked
    assert interleave([srt, mrs], heads[:2], min_run=2)[:7] == [(0, 0), (1, 0), (1, 1), (0, 1), (0, 2), (1, 2), (0, 3)]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_datasets_sharing_a_haystack_are_cut_into_parts_in_stream_order(tmp_path: Path, lang: str) -> None:
    """S-RT and M-RS of one language alternate inside a shard as numbered parts: each part a contiguous
    range, the parts of a dataset in row order covering it once, so OpenCompass's eval merges them back.
    (Chinese: a 1k prompt is shorter in characters than the English instructions and haystack head.)"""
    datasets = needlebench_datasets(
        suite="4k",
        tasks=["srt", "mrs"],
        langs=[lang],
        lengths=[1000, 2000],
        depths=[0, 50, 100],
        repeats=2,
        mrs=dict(num_needles=[2]),
    )
    (task,) = _partition(datasets, tmp_path, model={**MODEL, "batch_size": 2}, num_shards=1)
    chunks = task["datasets"][0]
    assert len(chunks) > len(datasets)  # interleaved, not dataset after dataset
    assert [_dataset_of(c) for c in chunks[:4]] == [d["abbr"] for d in datasets] * 2
    leads = []  # parts shorter than a batch, a dataset's last part aside
    for d in datasets:
        mine = [c for c in chunks if _dataset_of(c) == d["abbr"]]
        assert [c["abbr"] for c in mine] == [f"{d['abbr']}_{i}" for i in range(len(mine))]
        ranges = [tuple(int(x) for x in c["reader_cfg"]["test_range"].strip("[]").split(":")) for c in mine]
        assert ranges[0][0] == 0 and all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        assert ranges[-1][1] == len(load_rows(d["task"], **config_params(d)))
        leads += [b - a for a, b in ranges[:-1] if b - a < 2]
    # a batch at least (a repeat here has 6 rows), but a haystack's lead: one prompt, the farthest needle of its
    # (length, repeat), sent alone first where the group's next prompt comes from the other dataset (where it
    # comes from its own, the two are one part: OpenCompass batches inside a part)
    assert leads and set(leads) == {1}


def test_raw_messages_to_a_local_model_stop_the_run_before_any_model_call(tmp_path: Path) -> None:
    """``template="raw"`` with a local model: OpenCompass 0.5.4 would fail in the model (tests/test_model_input.py);
    the partitioner stops the run first, with one message naming the model and its datasets, and plans nothing."""
    from mmengine.config import ConfigDict

    datasets = needlebench_datasets(suite="4k", tasks=["srt"], langs=["en"], repeats=1, profile="v1", template="raw")
    part = NeedleBenchPartitioner(out_dir=str(tmp_path / "predictions"))
    cfg = ConfigDict(models=[MODEL], datasets=datasets, work_dir=str(tmp_path))
    with pytest.raises(SystemExit, match=r"template='raw'.*API models only") as stopped:
        part(cfg)
    assert MODEL["abbr"] in str(stopped.value) and "needlebench_srt_en_4k" in str(stopped.value)
    assert not (tmp_path / "needlebench_plan.json").exists()


def test_the_infer_tasks_budget_is_the_plans_for_every_model_kind(tmp_path: Path) -> None:
    """The plan decides each (model, dataset)'s output budget once (``Limit.out_len``); every infer task's dataset
    carries it as its inferencer's ``max_out_len``, which OpenCompass's infer task generates with, for every kind
    of model our builders make and whether the budget comes from the model or from the dataset."""
    from needlebench.opencompass.models import api_model, hf_model, lmdeploy_model, reasoning, vllm_model
    from needlebench.planning.run import part_config, plan_run
    from needlebench.planning.settings import RunSettings

    datasets = needlebench_datasets(
        suite="4k",
        tasks=["srt", "mrt"],
        langs=["en"],
        lengths=[1000],
        depths=[0, 100],
        repeats=1,
        max_out_len={"mrt": 40},
    )
    models = [
        hf_model("hf", "/nonexistent/hf", max_seq_len=8192, max_out_len=24),
        vllm_model("vllm", "/nonexistent/vllm", max_seq_len=8192, max_out_len=32),
        lmdeploy_model("lmdeploy", "/nonexistent/lmdeploy", max_seq_len=8192, max_out_len=48),
        api_model("api", "served", "http://127.0.0.1:1/v1", max_seq_len=8192, max_out_len=56),
        reasoning(vllm_model("reasoner", "/nonexistent/r1", max_seq_len=8192), max_out_len=4096),
        {**MODEL, "abbr": "oracle", "type": "needlebench.opencompass.scripted.OracleModel", "max_out_len": 16},
    ]
    plan = plan_run(models, datasets, RunSettings())
    seen = set()
    for model, run in zip(models, plan.models, strict=True):
        for shard in run.shards:
            for part in shard.parts:
                dataset = next(d for d in datasets if d["abbr"] == part.dataset)
                limit = run.limits[part.dataset]
                want = 40 if "mrt" in part.dataset else model["max_out_len"]
                assert limit.out_len == want, (model["abbr"], part.dataset)
                assert part_config(dataset, limit, part)["infer_cfg"]["inferencer"]["max_out_len"] == want
                seen.add(model["abbr"])
    assert seen == {m["abbr"] for m in models}
    # and in the task configs the partitioner renders (a local model: no server to ask)
    tasks = _partition(datasets, tmp_path, model={**MODEL, "max_out_len": 24}, num_shards=2)
    stored = read_plan(tmp_path).model("m")
    chunks = [chunk for task in tasks for chunk in task["datasets"][0]]
    assert chunks and all(
        c["infer_cfg"]["inferencer"]["max_out_len"] == stored.limits[_dataset_of(c)].out_len for c in chunks
    )
    assert {stored.limits[_dataset_of(c)].out_len for c in chunks} == {24, 40}
