"""The batch-bounded inferencer and eval task (issue 35): OpenCompass's files byte for byte, memory bounded by a batch.

``BatchGenInferencer`` and ``NeedleBenchEvalTask`` replace OpenCompass's ``GenInferencer`` and
``OpenICLEvalTask`` in our configs. They must write the same prediction and result files from the same
config (the main job's tiny suite plus ATC, NeedleChain and the 2024 ATC, split over shards into parts,
with the oracle, the hostile-text model and a model that echoes prompts back), resume from each other's
``tmp_*.jsonl``, and hold one batch of prompts, not the shard: an infer task's peak memory must grow by less
than 20% when its shard's prompt bytes grow 8x, where OpenCompass's grows with them.
"""

from __future__ import annotations

import copy
import filecmp
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pyarrow.compute as pc
import pytest
from conftest import ROOT, assert_linear

from needlebench.runfolder.predictions import PredictionFile, PredictionLog, iter_prediction_file, looks_whole

STOCK_INFERENCER = "opencompass.openicl.icl_inferencer.GenInferencer"
OURS_INFERENCER = "needlebench.opencompass.inferencer.BatchGenInferencer"


def _config() -> Any:
    """The main job's tiny suite (configs/eval_needlebench_tiny.py's datasets) and a dataset of every other
    prompt shape, with three scripted models, batch size 3, cut into 3 shards."""
    from mmengine.config import Config

    from needlebench.opencompass.configs import atc_datasets, atc_mc_datasets, needlechain_datasets

    datasets = list(Config.fromfile(str(ROOT / "configs" / "eval_needlebench_tiny.py"))["datasets"])
    datasets += atc_datasets(langs=["en"], needle_counts=[2, 4], repeats=1)
    datasets += needlechain_datasets(k_values=[5], points=2)  # a system prompt
    datasets += atc_mc_datasets(langs=["zh"], styles=["direct"], steps=[2, 3], repeats=1)  # few-shot chat rounds
    scripted = dict(max_seq_len=2_000_000, max_out_len=64, batch_size=3, run_cfg=dict(num_gpus=0))
    models = [
        dict(type="needlebench.opencompass.scripted.OracleModel", abbr="oracle", datasets=datasets, **scripted),
        dict(type="garbage_model.GarbageModel", abbr="garbage", size=20_000, **scripted),
        dict(type="prompt_scripted.PromptScriptedModel", abbr="echo", **scripted),  # whole prompts answered back
    ]
    return Config(
        dict(models=models, datasets=datasets, eval=dict(runner=dict(task=dict(dump_details=True))))  # the CLI's
    )


def _pipeline(work: Path, stock: bool, prompts: str = "text") -> Path:
    """OpenCompass's infer and eval tasks, in this process, on the partitioner's plan of :func:`_config`.

    ``prompts`` is the run's ``runtime(prompts=...)``: what its prediction files keep of each prompt."""
    from mmengine.config import Config
    from opencompass.tasks import OpenICLEvalTask, OpenICLInferTask

    from needlebench.opencompass.eval_task import NeedleBenchEvalTask
    from needlebench.opencompass.partitioner import NeedleBenchPartitioner

    cfg = _config()
    cfg["work_dir"] = str(work)
    (work / "configs").mkdir(parents=True)  # as OpenCompass stores the run's config (`needlebench prompt` reads it)
    (work / "configs" / "run.py").write_text(Config(cfg.to_dict(), format_python_code=False).pretty_text)
    for d in cfg["datasets"]:
        d["infer_cfg"]["inferencer"]["type"] = STOCK_INFERENCER if stock else OURS_INFERENCER
    for task in NeedleBenchPartitioner(out_dir=str(work / "predictions"), num_shards=3, prompts=prompts)(cfg):
        OpenICLInferTask(task).run()
    eval_task = OpenICLEvalTask if stock else NeedleBenchEvalTask
    for task in NeedleBenchPartitioner(out_dir=str(work / "results"), stage="eval", eval_tasks=2)(cfg):
        eval_task(task).run()
    return work


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    base = tmp_path_factory.mktemp("inferencer")
    stock, ours = _pipeline(base / "stock", stock=True), _pipeline(base / "ours", stock=False)
    return stock, ours, _pipeline(base / "digest", stock=False, prompts="digest")


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def _same(a: Path, b: Path) -> bool:
    """The same bytes; for a ``samples.jsonl``, the same records once each request's cost (the clock's, and
    only where our inferencer logged one: ``runfolder/cost_log.py``) is set aside."""
    if not a.name.endswith(".samples.jsonl"):
        return filecmp.cmp(a, b, shallow=False)

    def records(path: Path) -> list[dict]:
        return [{k: v for k, v in json.loads(x).items() if k != "cost"} for x in path.read_text().splitlines()]

    return records(a) == records(b)


def test_predictions_and_results_are_opencompass_bytes(runs: tuple[Path, Path, Path]) -> None:
    """Every prediction and result file of the batch-bounded path equals the stock path's, byte for byte; beside
    them, ours adds only its record of how each file's requests went out (``needlebench_requests.jsonl``), its
    progress log (``needlebench_progress.jsonl``) and its cost log (``needlebench_costs.jsonl``), and each graded
    record the cost of its request."""
    from needlebench.runfolder.cost_log import COSTS_FILE
    from needlebench.runfolder.progress_log import PROGRESS_FILE
    from needlebench.runfolder.request_log import REQUESTS_FILE

    stock, ours, _ = runs
    for sub in ("predictions", "results"):
        names = _files(stock / sub)
        theirs = _files(ours / sub)
        added = [n for n in theirs if Path(n).name in (REQUESTS_FILE, PROGRESS_FILE, COSTS_FILE)]
        sidecars = {f"{Path(n).parent}/{f}" for n in names for f in (REQUESTS_FILE, PROGRESS_FILE, COSTS_FILE)}
        assert added == ([] if sub == "results" else sorted(sidecars))
        assert names == [n for n in theirs if n not in added]
        mismatched = [n for n in names if not _same(stock / sub / n, ours / sub / n)]
        assert mismatched == []
    names = _files(stock / "predictions")
    assert not [n for n in names if "tmp_" in n]  # finished tasks leave no tmp_*.jsonl, in either path
    parts = [n for n in names if n.rsplit(".", 1)[0].rsplit("_", 1)[-1].isdigit() and "_4k_" in n]
    assert parts, "the plan was meant to cut a dataset into parts (test_range)"
    prompts = [
        v["origin_prompt"]
        for n in names
        for _, v in iter_prediction_file(stock / "predictions" / n)
        if n.endswith(".json")
    ]
    assert {type(p).__name__ for p in prompts} == {"list"} and any(len(p) > 2 for p in prompts)  # chat rounds too
    results = _files(stock / "results")
    assert len([n for n in results if n.endswith(".samples.jsonl")]) == 3 * len(_config()["datasets"])
    oracle = json.loads((ours / "results" / "oracle" / "needlebench_srt_en_4k.json").read_text(encoding="utf-8"))
    assert oracle["score"] == 100 and oracle["details"]  # OpenCompass's dump_details default keeps our details


def test_prompts_kept_as_digests_change_no_answer_or_result_and_name_every_sample(
    runs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``runtime(prompts="digest")``: each entry keeps its prompt's digest and sample id in place of the prompt;
    the answers, the tmp_-free folders and every result file are the text run's, byte for byte; and
    ``needlebench prompt`` reads any sample's prompt back from the dataset cache, beside its kept digest."""
    from needlebench.commands.prompt import show_prompt
    from needlebench.runfolder.predictions import prompt_digest

    _, text, digest = runs
    assert _files(text / "predictions") == _files(digest / "predictions")
    assert [n for n in _files(text / "results") if not _same(text / "results" / n, digest / "results" / n)] == []
    by_dataset: dict[tuple[str, str], list[str]] = {}
    text_bytes = digest_bytes = 0
    for name in _files(text / "predictions"):
        if not name.endswith(".json"):
            continue
        if name.startswith("oracle/"):  # short answers: the prompts are most of what the text files hold
            text_bytes += (text / "predictions" / name).stat().st_size
            digest_bytes += (digest / "predictions" / name).stat().st_size
        for (key, full), (key2, kept) in zip(
            iter_prediction_file(text / "predictions" / name), iter_prediction_file(digest / "predictions" / name)
        ):
            assert key == key2 and list(kept) == ["prompt_digest", "sample_id", *list(full)[1:]], (name, kept)
            assert kept["prompt_digest"] == prompt_digest(full["origin_prompt"])
            assert {k: v for k, v in kept.items() if k not in ("prompt_digest", "sample_id")} == {
                k: v for k, v in full.items() if k != "origin_prompt"
            }
            model, stem = name.split("/", 1)[0], Path(name).stem
            whole, _, part = stem.rpartition("_")
            dataset = whole if part.isdigit() else stem  # a dataset predicted in parts: <abbr>_0, <abbr>_1, ...
            by_dataset.setdefault((model, dataset), []).append(kept["sample_id"])
    assert digest_bytes * 5 < text_bytes, (digest_bytes, text_bytes)
    # a sample of S-RT (predicted in parts or whole): its prompt from the cache is the one the text run kept
    name = next(n for n in _files(text / "predictions") if n.startswith("echo/needlebench_srt_en_4k"))
    (key, full), (_, kept) = next(
        zip(iter_prediction_file(text / "predictions" / name), iter_prediction_file(digest / "predictions" / name))
    )
    capsys.readouterr()
    assert show_prompt(digest, kept["sample_id"], model="echo") == 0
    shown = capsys.readouterr().out
    prompt = shown.split("--- prompt (", 1)[1].split(") ---\n", 1)[1].split("\n--- ", 1)[0]  # to the answers
    sent = full["origin_prompt"]  # text, or the chat rounds OpenCompass rendered
    turns = [sent] if isinstance(sent, str) else [turn.get("prompt", "") for turn in sent]
    assert prompt and any(prompt in turn for turn in turns), (prompt[:200], sent)
    assert f"{name.split('/', 1)[1]} entry {key}, digest {kept['prompt_digest']}" in shown, shown[-500:]
    assert show_prompt(digest, "no-such-sample") == 1
    # the ids name every sample the dataset scored, each once (a dataset's parts together)
    for model in ("oracle", "garbage", "echo"):
        for samples in (text / "results" / model).glob("*.samples.jsonl"):
            dataset = samples.name.removesuffix(".samples.jsonl")
            ids = [json.loads(line)["id"] for line in samples.read_text(encoding="utf-8").splitlines()]
            assert sorted(by_dataset[(model, dataset)]) == sorted(ids), (model, dataset)


def _retriever(cfg: dict[str, Any]) -> tuple[Any, Any]:
    """A dataset config's retriever and prompt template, built as OpenCompass's infer task builds them."""
    from opencompass.openicl.icl_prompt_template import PromptTemplate
    from opencompass.openicl.icl_retriever import ZeroRetriever
    from opencompass.utils import build_dataset_from_cfg

    template = dict(cfg["infer_cfg"]["prompt_template"])
    template.pop("type")
    return ZeroRetriever(build_dataset_from_cfg(cfg)), PromptTemplate(**template)


class _Killed(RuntimeError):
    pass


def _stops_after(model: Any, calls: int) -> Any:
    """``model`` whose ``generate`` raises on call ``calls + 1``: a task killed mid-shard."""
    done = [0]
    generate = model.generate

    def limited(*args: Any, **kwargs: Any) -> Any:
        if done[0] == calls:
            raise _Killed
        done[0] += 1
        return generate(*args, **kwargs)

    model.generate = limited
    return model


@pytest.mark.parametrize("first,second", [("stock", "ours"), ("ours", "stock"), ("ours", "ours")])
def test_resume_from_each_others_tmp_file(tmp_path: Path, first: str, second: str) -> None:
    """A task killed after some batches leaves ``tmp_<abbr>.jsonl``; the other inferencer resumes from it, asks
    only for the rest, and the file it ends with is the uninterrupted stock task's, byte for byte."""
    from opencompass.openicl.icl_inferencer import GenInferencer
    from prompt_scripted import PromptScriptedModel

    from needlebench.opencompass.configs import needlebench_datasets
    from needlebench.opencompass.inferencer import BatchGenInferencer
    from needlebench.runfolder.cost_log import COSTS_FILE
    from needlebench.runfolder.progress_log import PROGRESS_FILE

    (cfg,) = needlebench_datasets(suite="4k", tasks=["srt"], langs=["zh"], lengths=[1000, 2000], repeats=2)
    retriever, template = _retriever(cfg)
    kinds = {"stock": GenInferencer, "ours": BatchGenInferencer}

    def infer(kind: str, folder: Path, model: Any) -> None:
        inferencer = kinds[kind](model=model, max_out_len=16, batch_size=4, output_json_filepath=str(folder))
        inferencer.inference(retriever, prompt_template=template, output_json_filename="srt.json")

    infer("stock", tmp_path / "whole", PromptScriptedModel())
    with pytest.raises(_Killed):
        infer(first, tmp_path / "resumed", _stops_after(PromptScriptedModel(), 3))
    tmp = tmp_path / "resumed" / "tmp_srt.jsonl"
    assert len(tmp.read_text(encoding="utf-8").splitlines()) == 12  # 3 batches of 4 written before the kill
    ours = (PROGRESS_FILE, COSTS_FILE)  # ours logs its batches and what they cost
    left = sorted(p.name for p in tmp.parent.iterdir() if p.name not in ours)
    assert left == ["tmp_srt.jsonl"]  # ours drops its unfinished file
    model = PromptScriptedModel()
    asked: list[int] = []
    generate = model.generate
    model.generate = lambda inputs, *a, **k: asked.append(len(inputs)) or generate(inputs, *a, **k)  # type: ignore[method-assign]
    infer(second, tmp_path / "resumed", model)
    assert sum(asked) == len(retriever.test_ds) - 12  # no prompt answered twice
    assert (tmp_path / "resumed" / "srt.json").read_bytes() == (tmp_path / "whole" / "srt.json").read_bytes()
    assert not tmp.exists()


def test_a_tmp_file_that_is_not_json_is_set_aside_as_opencompass_does(tmp_path: Path) -> None:
    """A line that does not parse: the file moves to ``.bak`` and the task starts over (OpenCompass's behaviour;
    the partitioner cuts such files back to their whole lines before a resume, ``resume.py``)."""
    log = PredictionLog(tmp_path / "tmp_x.jsonl")
    log.path.write_text('{"idx": "0", "prediction": "a"}\n{"idx": "1", "predic\n', encoding="utf-8")
    assert log.restore() == 0 and not log.path.exists()
    assert (tmp_path / "tmp_x.jsonl.bak").exists()
    log.append([("0", {"prediction": "b"})])
    log.write_json(tmp_path / "x.json")
    assert json.loads((tmp_path / "x.json").read_text(encoding="utf-8")) == {"0": {"prediction": "b"}}


def test_prediction_log_is_a_dict_on_disk(tmp_path: Path) -> None:
    """What ``json.dump`` of the restored-and-updated dict writes: a key written twice keeps its first place and
    its last value; U+2028 and U+0085 inside a prompt are one line of the ``tmp_`` file (``str.splitlines``, which
    OpenCompass restores with, would break them); an empty log is ``{}``."""
    samples = [
        (str(i), {"origin_prompt": f"line\u2028sep\x85{i}" * 3, "prediction": f"p{i}", "gold": "g"}) for i in range(5)
    ]
    log = PredictionLog(tmp_path / "tmp_x.jsonl")
    log.append(samples[:3])
    log.append([("1", {"prediction": "again"}), *samples[3:]])
    restored = PredictionLog(log.path)
    assert restored.restore() == 5
    expected = dict(samples)
    expected["1"] = {"prediction": "again"}
    assert restored.write_json(tmp_path / "x.json") == [v.get("prediction") for v in expected.values()]
    assert (tmp_path / "x.json").read_text(encoding="utf-8") == json.dumps(expected, indent=4, ensure_ascii=False)
    PredictionLog(tmp_path / "none.jsonl").write_json(tmp_path / "empty.json")
    assert (tmp_path / "empty.json").read_text() == json.dumps({}, indent=4)
    twice = PredictionFile(tmp_path / "twice.json")  # written as the samples come: a key twice is not a dict
    twice.extend([("0", {"prediction": "a"}), ("0", {"prediction": "b"})])
    assert not twice.whole
    twice.discard()
    assert not (tmp_path / ".twice.json.part").exists() and not (tmp_path / "twice.json").exists()


def test_prediction_file_reader_is_linear_and_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The eval task's reader gives ``json.load``'s entries for any JSON object file, in chunks that cut strings,
    escapes and numbers anywhere; a cut file is an error and ``looks_whole`` says so; time linear in the size."""
    import needlebench.runfolder.predictions as predictions

    data = {
        str(i): {"origin_prompt": [{"role": "HUMAN", "prompt": 'a"\\\n\u00e9\U0001f600' * (i * 37)}], "n": i * 1.5e-3}
        for i in range(40)
    }
    data["last"] = 12345678901234567890  # a top-level number that a chunk boundary can split
    for indent in (4, None):
        path = tmp_path / f"p{indent}.json"
        path.write_text(json.dumps(data, indent=indent, ensure_ascii=False), encoding="utf-8")
        for chunk in (7, 64, 1 << 22):
            monkeypatch.setattr(predictions, "_CHUNK", chunk)
            assert dict(iter_prediction_file(path)) == data
        assert looks_whole(path)
        text = path.read_bytes()
        for cut in range(1, len(text), max(1, len(text) // 97)):
            (tmp_path / "cut.json").write_bytes(text[:cut])
            assert not looks_whole(tmp_path / "cut.json"), cut
    monkeypatch.setattr(predictions, "_CHUNK", 4096)

    def sized(n: int) -> Path:
        path = tmp_path / f"big{n}.json"
        entries = {str(i): {"origin_prompt": "x" * 3000, "prediction": "y"} for i in range(n)}
        path.write_text(json.dumps(entries, indent=4), encoding="utf-8")
        return path

    assert_linear(
        lambda p: sum(1 for _ in iter_prediction_file(p)), sized(400), sized(3200), label="iter_prediction_file"
    )


@pytest.mark.parametrize("n", [1, 3])
def test_evaluator_groups_as_opencompass_without_holding_the_rows(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``NeedleBenchEvaluator.group`` reads two columns where ``BaseEvaluator.group`` keeps whole rows (prompts
    included); ``evaluate`` gives the same result either way, with OpenCompass's repeated sampling too."""
    from opencompass.openicl.icl_evaluator import BaseEvaluator
    from opencompass.utils import build_dataset_from_cfg
    from prompt_scripted import scripted_answer

    from needlebench.opencompass.configs import needlebench_datasets
    from needlebench.opencompass.evaluator import NeedleBenchEvaluator

    (cfg,) = needlebench_datasets(suite="4k", tasks=["srt"], langs=["en"], lengths=[1000, 2000], repeats=2)
    test = build_dataset_from_cfg({**cfg, "n": n, "k": n}).test
    predictions = [scripted_answer(p) for p in test["prompt"]]
    kwargs = dict(predictions=predictions, references=test["answer"], test_set=test)
    ours = NeedleBenchEvaluator().evaluate(n, n, copy.deepcopy(test), **kwargs)
    monkeypatch.setattr(NeedleBenchEvaluator, "group", BaseEvaluator.group)
    theirs = NeedleBenchEvaluator().evaluate(n, n, copy.deepcopy(test), **kwargs)
    assert json.dumps(ours, sort_keys=True, default=str) == json.dumps(theirs, sort_keys=True, default=str)  # NaN alike
    score = next(v for key, v in ours.items() if key.startswith("score"))  # "score (3 runs average)" for n=3
    assert len(ours["details"]) == len(test) // n and 0 < score < 100
    assert any("G-Pass" in key for key in ours) == (n > 1)  # the groups feed OpenCompass's G-Pass@k


# -- memory ------------------------------------------------------------------------------------------------------


def _peaks(cmd: list[str], env: dict[str, str]) -> tuple[int, int]:
    """Peak RSS and peak anonymous memory (RSS less file-backed pages) of a process, polled every 10 ms.

    RSS also counts the pages of the memory-mapped dataset a task has read until the task hands them back
    (``needlebench.cache.pages``); the anonymous part is what a memory cap cannot reclaim. OpenCompass's
    inferencer holds its prompts in anonymous memory from the first request to the end, so a poll sees them.
    """
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    rss, anon = [0], [0]

    def poll() -> None:
        p = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                mem = p.memory_info()
                rss[0], anon[0] = max(rss[0], mem.rss), max(anon[0], mem.rss - mem.shared)
            except psutil.Error:
                break
            time.sleep(0.01)

    watcher = threading.Thread(target=poll)
    watcher.start()
    out, _ = proc.communicate(timeout=600)
    watcher.join()
    assert proc.returncode == 0, out.decode(errors="replace")[-3000:]
    return rss[0], anon[0]


def test_infer_and_eval_task_memory_does_not_grow_with_the_shard(tmp_path: Path) -> None:
    """One dataset of 128k-token prompts: 8x the prompt bytes (40 vs 320 prompts, about 20 and 160 MB) grow the
    peak RSS and the peak anonymous memory of our infer task, and of our eval task on its predictions, by less
    than 20%; OpenCompass's inferencer, on the larger shard, grows by more. Every task starts as a run starts it,
    through the lean entry point (measured: ours 115 -> 117 MB anonymous, OpenCompass's inferencer 619 MB)."""
    from mmengine.config import Config

    from needlebench.cache.rows import load_rows
    from needlebench.opencompass.configs import needlebench_datasets
    from needlebench.tasks import config_params

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]), "HF_HUB_OFFLINE": "1"}
    model = dict(type="garbage_model.GarbageModel", abbr="garbage", size=2000, max_seq_len=2_000_000, max_out_len=8,
                 batch_size=4, run_cfg=dict(num_gpus=0))  # fmt: skip

    def run(repeats: int, inferencer: str, evaluate: bool) -> tuple[int, dict[str, tuple[int, int]]]:
        """(prompt bytes, {"infer": (peak RSS, peak anonymous), "eval": the eval task's, unless not evaluated})."""
        (d,) = needlebench_datasets(suite="128k", tasks=["srt"], langs=["en"], lengths=[128000],
                                    depths=[0, 25, 50, 75, 100], repeats=repeats)  # fmt: skip
        d["infer_cfg"]["inferencer"]["type"] = inferencer
        rows = load_rows(d["task"], **config_params(d))  # built here, so the tasks only read the cache
        prompt_bytes = pc.sum(pc.binary_length(rows.with_format("arrow")[:]["prompt"])).as_py()
        work = tmp_path / f"{inferencer.rsplit('.', 1)[-1]}_{repeats}"
        config = tmp_path / f"{work.name}.py"
        task = dict(
            models=[model], datasets=[[d]], work_dir=str(work), eval=dict(runner=dict(task=dict(dump_details=True)))
        )
        Config(task).dump(str(config))
        # each task starts as a run starts it (the lean entry point): the inferencer is the one difference
        peaks = {"infer": _peaks([sys.executable, "-m", "needlebench.launch.task_entry", "infer", str(config)], env)}
        (prediction,) = (work / "predictions" / "garbage").glob("*.json")
        assert len(dict(iter_prediction_file(prediction))) == len(rows)
        if evaluate:
            peaks["eval"] = _peaks([sys.executable, "-m", "needlebench.launch.task_entry", "eval", str(config)], env)
            result = json.loads((work / "results" / "garbage" / prediction.name).read_text(encoding="utf-8"))
            assert result["num_scored"] == len(rows) and result["score"] == 0  # every hostile answer graded
        return prompt_bytes, peaks

    small_bytes, small = run(8, OURS_INFERENCER, evaluate=True)
    large_bytes, large = run(64, OURS_INFERENCER, evaluate=True)
    assert large_bytes >= 7.9 * small_bytes
    _, stock = run(64, STOCK_INFERENCER, evaluate=False)
    print(f"{small_bytes / 1e6:.0f} -> {large_bytes / 1e6:.0f} MB of prompts, peak RSS / anonymous MB: "
          + ", ".join(f"{k} {small[k][0] / 1e6:.0f}/{small[k][1] / 1e6:.0f} -> {large[k][0] / 1e6:.0f}/"
                      f"{large[k][1] / 1e6:.0f}" for k in small)
          + f" (OpenCompass's inferencer {stock['infer'][0] / 1e6:.0f}/{stock['infer'][1] / 1e6:.0f})")  # fmt: skip
    for kind in ("infer", "eval"):
        for measure, grown, base in zip(("RSS", "anonymous"), large[kind], small[kind], strict=True):
            assert grown < 1.2 * base, f"{kind} {measure}: {base / 1e6:.0f} MB -> {grown / 1e6:.0f} MB"
    stock_anon, ours_anon = stock["infer"][1], small["infer"][1]
    assert stock_anon > 1.2 * ours_anon, f"OpenCompass's inferencer: {stock_anon / 1e6:.0f} MB ({ours_anon / 1e6:.0f})"


def test_a_vllm_request_output_says_its_cost_and_nothing_else_is_guessed() -> None:
    """In-process vLLM: each RequestOutput's prompt tokens and cached tokens, and where it kept stats, the queue,
    first-token and decode times from one clock (v1's engine stamps or v0's wall times, never mixed); the
    engine's ``generate`` is wrapped once so the batch's outputs are kept (OpenCompass's model returns texts)."""
    from types import SimpleNamespace

    from needlebench.opencompass.inferencer import _Clock, _request_output_facts

    v1 = SimpleNamespace(queued_ts=10.0, scheduled_ts=10.5, first_token_ts=11.0, last_token_ts=13.0, arrival_time=9e9)
    out = SimpleNamespace(prompt_token_ids=[1] * 40, num_cached_tokens=32, metrics=v1)
    assert _request_output_facts(out) == {
        "prompt_tokens": 40,
        "cached_tokens": 32,
        "queue_ms": 500.0,
        "ttft_ms": 500.0,
        "decode_ms": 2000.0,
    }
    v0 = SimpleNamespace(arrival_time=1.0, first_scheduled_time=1.25, first_token_time=2.0, last_token_time=2.5)
    assert _request_output_facts(SimpleNamespace(prompt_token_ids=[1, 2], num_cached_tokens=0, metrics=v0)) == {
        "prompt_tokens": 2,
        "cached_tokens": 0,
        "queue_ms": 250.0,
        "ttft_ms": 750.0,
        "decode_ms": 500.0,
    }
    assert _request_output_facts(SimpleNamespace()) == {}  # nothing said: nothing set

    class VLLMwithChatTemplate:  # the class name the engine is told by; its engine a stand-in vllm.LLM
        def __init__(self) -> None:
            self.model = SimpleNamespace(generate=lambda prompts, params: [out for _ in prompts])

        def generate(self, inputs: list[str]) -> list[str]:
            self.model.generate(inputs, None)
            return ["answer" for _ in inputs]

    model = VLLMwithChatTemplate()
    clock = _Clock(model)
    model.generate(["a", "bb"])
    costs = clock.costs(["a", "bb"])
    assert [(c.prompt_tokens, c.cached_tokens, c.shared) for c in costs] == [(40, 32, True), (40, 32, True)]
    assert _Clock(model).outputs is clock.outputs == []  # wrapped once; a new batch starts empty
