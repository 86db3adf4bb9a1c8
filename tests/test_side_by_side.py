"""Ours next to OpenCompass's own NeedleBench v2, both through the real ``opencompass``, from the same files.

OpenCompass-format stand-in files go where both look for them (``$COMPASS_DATA_CACHE/data/needlebench``,
and a Hugging Face hub cache for the files OpenCompass's M-RS loader fetches from the hub). The same
prompt-scripted model (``tests/prompt_scripted.py``: its answer is a function of the prompt alone)
answers a slice of the 4k suite in OpenCompass's unmodified built-in configs (``side_builtin.py``) and
in ours with ``corpus="opencompass"`` (``side_ours.py``). Then, sample by sample, whole prompts, nothing
masked:

* each run's prompt is exactly what its generator builds here: ours from our config, OpenCompass's from its
  loader on the same config entry (for M-RT with the needle set its unseeded draw picked, read from its
  answer column);
* ours equals OpenCompass's, or differs only as ``test_differential_prompts`` allows, attributed by the same
  code: OpenCompass's bytes with a listed fix applied equal ours byte for byte (M-RT with OpenCompass's
  draw seeded as ours is);
* a prompt identical on both sides gets the same score (S-RT, M-RS, ATC); M-RT, whose prompts differ by
  OpenCompass's draw, is scored both ways: our grader on OpenCompass's outputs gives its per-dataset and
  per-depth numbers, its evaluator on ours gives our per-sample scores;

and every summary cell whose prompts are all identical holds the same score in OpenCompass's summary and
in ``needlebench_summary.csv``. The counts per kind are printed.
"""

from __future__ import annotations

import ast
import csv
import json
import os
import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, bin_path, run_opencompass

pytestmark = pytest.mark.e2e

_HUB_FILES = (
    "PaulGrahamEssays.jsonl",
    "names.json",
    "zh_finance.jsonl",
    "zh_game.jsonl",
    "zh_general.jsonl",
    "zh_government.jsonl",
    "zh_movie.jsonl",
    "zh_tech.jsonl",
)


def _hub_cache(home: Path, data: Path) -> None:
    """The files OpenCompass's M-RS loader asks the hub for, as an offline hub cache holds them."""
    repo = home / "hub" / "datasets--opencompass--NeedleBench"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name in _HUB_FILES:  # the loader fetches all of them and reads only its language's
        (snapshot / name).write_bytes((data / name).read_bytes() if (data / name).exists() else b"")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    sys.path.insert(0, str(ROOT))
    from bench.standin import build_standin

    root = tmp_path_factory.mktemp("side")
    data = build_standin(root)
    _hub_cache(root / "hf", data)
    env = dict(
        os.environ,
        COMPASS_DATA_CACHE=str(root),
        HF_HOME=str(root / "hf"),
        HF_HUB_OFFLINE="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")])),
    )
    # OpenCompass's own NeedleBench on its own command (the `opencompass` script)
    builtin = run_opencompass(
        "tests/configs/side_builtin.py", root / "builtin", env=env, command=[bin_path("opencompass")]
    )
    ours = run_opencompass("tests/configs/side_ours.py", root / "ours", env=env)
    return builtin, ours, data


def _prompt(origin: str | list) -> str:
    """The HUMAN turn of a prediction record's ``origin_prompt`` (a prompt list, or the repr of one)."""
    turns = ast.literal_eval(origin) if isinstance(origin, str) else origin
    return next(t["prompt"] for t in reversed(turns) if t.get("role") == "HUMAN")


def _predictions(path: Path) -> list[dict]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [data[k] for k in sorted(data, key=int)]


_OC_NAME = re.compile(
    r"Length(\d+)(?:Depth(\d+))?_(origin|parallel|2needle)_(en|zh)_4k|NeedleBenchATCDataset-(\d+)Needle-EN"
)
_OC_TASK = {"origin": "srt", "parallel": "mrt", "2needle": "mrs"}


def _builtin_samples(run: Path) -> dict[tuple, dict]:
    """OpenCompass's samples by coordinates: prompt, prediction, gold, its dataset and row, and the sample's score
    (M-RT: none, its results are per dataset and per depth)."""
    out: dict[tuple, dict] = {}
    folder = run / "predictions" / "scripted"
    for path in sorted(folder.glob("*.json")):
        m = _OC_NAME.fullmatch(path.stem)
        assert m, path.name
        preds = _predictions(path)
        result = json.loads((run / "results" / "scripted" / path.name).read_text(encoding="utf-8"))
        details = result.get("details") if isinstance(result.get("details"), list) and result["details"] else None
        for i, pred in enumerate(preds):
            if m.group(5):  # ATC: rows in OpenCompass's order; matched to ours by prompt below
                key: tuple = ("atc", "en", int(m.group(5)), i)
            elif m.group(3) == "parallel":
                key = ("mrt", m.group(4), int(m.group(1)), i)
            else:
                key = (_OC_TASK[m.group(3)], m.group(4), int(m.group(1)), int(m.group(2)), i)
            score = None
            if details is not None:
                d = details[i]
                score = float(d["score"][0]) if "score" in d else 100.0 * bool(d["correct"][0])
            out[key] = {
                "prompt": _prompt(pred["origin_prompt"]),
                "prediction": pred["prediction"],
                "gold": pred["gold"],
                "score": score,
                "abbr": path.stem,
                "row": i,
            }
    return out


def _our_samples(run: Path) -> dict[tuple, dict]:
    out: dict[tuple, dict] = {}
    results = run / "results" / "scripted"
    # a dataset's predictions: its file, or its parts ``abbr_0, abbr_1, ...`` in order (S-RT and M-RS come
    # interleaved, planning/stream.py), as OpenCompass's eval task merges them
    parts: dict[str, list[tuple[int, Path]]] = {}
    for path in (run / "predictions" / "scripted").glob("*.json"):
        base, _, number = path.stem.rpartition("_")
        whole = (results / f"{path.stem}.samples.jsonl").exists()
        parts.setdefault(path.stem if whole else base, []).append((0 if whole else int(number), path))
    for abbr, files in sorted(parts.items()):
        records = [json.loads(x) for x in (results / f"{abbr}.samples.jsonl").read_text().splitlines()]
        preds = [p for _, path in sorted(files) for p in _predictions(path)]
        for pred, r in zip(preds, records, strict=True):
            out[_our_key(r)] = {
                "prompt": _prompt(pred["origin_prompt"]),
                "prediction": pred["prediction"],
                "score": float(r["score"]),
                "gold": json.loads(pred["gold"]),
            }
    return out


def _our_key(meta: dict) -> tuple:
    """A sample's coordinates from its record or its metadata (with ``task`` and ``lang``)."""
    if meta["task"] == "atc":
        return ("atc", meta["lang"], meta["num_needles"], meta["question_type"], meta["repeat"])
    if meta["task"] == "mrt":
        return ("mrt", meta["lang"], meta["length"], meta["repeat"])
    return (meta["task"], meta["lang"], meta["length"], meta["depth"], meta["repeat"])


@pytest.fixture(scope="module")
def generated(runs: tuple[Path, Path, Path]) -> Iterator[tuple[dict, dict]]:
    """Both generators in this process, on the runs' files: ours from ``side_ours.py``'s datasets, by coordinates;
    OpenCompass's config entries from ``side_builtin.py``, by dataset name."""
    from mmengine.config import Config

    from needlebench.context import corpora, haystack
    from needlebench.tasks import config_params, get_task, kinship, make_params
    from needlebench.tasks.sparse import needles

    _, _, data = runs
    caches = (corpora.load_corpus, corpora.corpus_digest, haystack.load_tokenized, needles.load_needle_bank)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COMPASS_DATA_CACHE", str(data.parent.parent))
        for c in (*caches, kinship.load_name_list):
            c.cache_clear()
        ours = {}
        for d in Config.fromfile(str(ROOT / "tests" / "configs" / "side_ours.py"))["datasets"]:
            for sample in get_task(d["task"]).generate(make_params(d["task"], **config_params(d))):
                ours[_our_key({"task": sample.task, "lang": sample.lang, **sample.meta})] = sample
        cells = {
            d["abbr"]: {k: v for k, v in d.items() if not k.endswith("_cfg") and k != "abbr"}
            for d in Config.fromfile(str(ROOT / "tests" / "configs" / "side_builtin.py"))["datasets"]
        }
        yield ours, cells
    for c in (*caches, kinship.load_name_list):
        c.cache_clear()


def _drawn_needles(gold: str, lang: str, data: Path) -> list[dict]:
    """The needle set OpenCompass's unseeded draw picked, in the order it drew it, from a repeat-0 answer
    (``keyword*keyword*...#depths``): repeat r shows the set in ``Random(r).shuffle``'s order."""
    keywords = gold.split("#")[0].split("*")
    language = {"en": "English", "zh": "Chinese"}[lang]
    entries = [json.loads(x) for x in (data / "needles.jsonl").read_text(encoding="utf-8").splitlines()]
    by_keyword = {e["arg2"]: e for e in entries if e["language"] == language}
    order = list(range(len(keywords)))
    random.Random(0).shuffle(order)  # repeat 0's order: shown[i] = drawn[order[i]]
    drawn: list[dict] = [{}] * len(keywords)
    for i, k in enumerate(order):
        drawn[k] = by_keyword[keywords[i]]
    return drawn


def _oc_rows(cell: dict, data: Path, drawn: list[dict] | None = None) -> list[tuple[str, str, list[int]]]:
    """OpenCompass's loader on one config entry, in this process (M-RT: with the needle set given, or seeded)."""
    from test_differential_prompts import _run_oc

    if drawn is None:
        return _run_oc(cell, data)
    from opencompass.datasets.needlebench_v2 import parallel

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parallel, "get_unique_entries", lambda *a, **k: [dict(e) for e in drawn])
        return _run_oc(cell, data)


def test_same_inputs_same_scores_as_opencompass(runs: tuple[Path, Path, Path], generated: tuple[dict, dict]) -> None:
    from test_differential_prompts import ALLOWED_TAGS, _explain

    builtin_run, our_run, data = runs
    generated_ours, cells = generated
    theirs, ours = _builtin_samples(builtin_run), _our_samples(our_run)
    # ATC: OpenCompass's rows matched to ours by prompt (every ATC prompt is identical: test_differential_prompts)
    by_prompt = {v["prompt"]: k for k, v in ours.items() if k[0] == "atc"}
    theirs = {(by_prompt.get(v["prompt"], k) if k[0] == "atc" else k): v for k, v in theirs.items()}
    assert set(theirs) == set(ours), sorted(set(theirs) ^ set(ours))[:5]
    assert set(generated_ours) == set(ours)
    oc_rows: dict[str, list] = {}
    kinds: Counter = Counter()
    same: Counter = Counter()
    cell_kinds: dict[tuple, set] = defaultdict(set)
    for key, mine in sorted(ours.items(), key=lambda kv: str(kv[0])):
        sample = generated_ours[key]
        assert mine["prompt"] == sample.prompt, key  # our run sent what our generator builds
        other = theirs[key]
        task, cell = key[0], (key[0], key[1], key[2])
        if task != "atc":
            entry = cells[other["abbr"]]
            if other["abbr"] not in oc_rows:  # its run sent what its loader builds (M-RT: with the set it drew)
                drawn = _drawn_needles(theirs[(*key[:-1], 0)]["gold"], key[1], data) if task == "mrt" else None
                built = _oc_rows(entry, data, drawn)
                assert [r[0] for r in built] == [theirs[(*key[:-1], i)]["prompt"] for i in range(len(built))]
                oc_rows[other["abbr"]] = _oc_rows(entry, data) if task == "mrt" else built
            prompt, _, tokens = oc_rows[other["abbr"]][other["row"]]
            kind, _ = _explain(task, entry, data, prompt, tokens, sample)
            assert kind in ALLOWED_TAGS[task], (key, kind)
        else:
            kind = "identical" if mine["prompt"] == other["prompt"] else "UNATTRIBUTED"
            assert kind == "identical", key
        if mine["prompt"] == other["prompt"] and other["score"] is not None:
            assert mine["score"] == other["score"], (key, mine["score"], other["score"])
            kind = "identical, same score"
            same[task] += 1
        kinds[kind] += 1
        cell_kinds[cell].add(kind)
    print(f"\nside by side, {len(ours)} samples: {dict(kinds)}")
    print(f"identical prompts with the same score, per task: {dict(same)}")
    assert all(same[task] >= 20 for task in ("srt", "mrs", "atc"))  # every scored family compared sample by sample
    _mrt_scores(builtin_run, theirs, ours)
    _same_cells(builtin_run, our_run, theirs, cell_kinds)


def _mrt_scores(builtin_run: Path, theirs: dict, ours: dict) -> None:
    """M-RT scored both ways: our grader on OpenCompass's outputs and golds gives its per-dataset and per-depth
    numbers; its evaluator on our outputs and golds (in its answer form) gives our per-sample scores."""
    from opencompass.datasets.needlebench_v2.parallel import NeedleBenchParallelEvaluator

    from needlebench.scoring import ScoreOptions
    from needlebench.tasks.sparse.recall import grade_mrt

    by_abbr: dict[str, list[dict]] = defaultdict(list)
    for key, v in theirs.items():
        if key[0] == "mrt":
            by_abbr[v["abbr"]].append(v)
    compared = 0
    for abbr, rows in sorted(by_abbr.items()):
        result = json.loads((builtin_run / "results" / "scripted" / f"{abbr}.json").read_text(encoding="utf-8"))
        hits: dict[int, list[bool]] = defaultdict(list)
        scores = []
        for v in sorted(rows, key=lambda r: r["row"]):
            keywords, depths = (x.split("*") for x in v["gold"].split("#"))
            gold = {"needles": [{"keywords": [k], "depth": int(d)} for k, d in zip(keywords, depths)], "match": "exact"}
            graded = grade_mrt(v["prediction"], gold, ScoreOptions())
            scores.append(graded.score)
            for d, hit in zip(depths, graded.extras["recalled"], strict=True):
                hits[int(d)].append(hit)
        assert sum(scores) / len(scores) == pytest.approx(float(result["average_score"]), abs=1e-6), abbr
        for d, found in hits.items():
            assert 100.0 * sum(found) / len(found) == pytest.approx(float(result[f"Depth{d}"]), abs=1e-6), (abbr, d)
        compared += len(rows)
    evaluator = NeedleBenchParallelEvaluator()
    with open(os.devnull, "w") as quiet:  # it prints every prediction
        stdout, sys.stdout = sys.stdout, quiet
        try:
            for key, mine in ours.items():
                if key[0] != "mrt":
                    continue
                needles_ = mine["gold"]["needles"]
                ref = "*".join(n["keywords"][0] for n in needles_) + "#" + "*".join(str(n["depth"]) for n in needles_)
                theirs_score = float(evaluator.score([mine["prediction"]], [ref])["average_score"])
                assert theirs_score == pytest.approx(mine["score"], abs=1e-6), key
                compared += 1
        finally:
            sys.stdout = stdout
    print(f"M-RT outputs scored both ways: {compared}")
    assert compared >= 200


def _same_cells(builtin_run: Path, our_run: Path, theirs: dict, cell_kinds: dict) -> None:
    """Every cell whose prompts are all identical: one number in both summaries (S-RT and M-RS per (language,
    length) against ``needlebench_summary.csv``; ATC per needle count against our dataset's accuracy)."""
    (oc_csv,) = (builtin_run / "summary").glob("summary_*.csv")
    oc = {(r["dataset"], r["metric"]): r["scripted"] for r in csv.DictReader(oc_csv.open(encoding="utf-8"))}
    table = {
        (r["task"], r["lang"], r["length"]): r
        for r in csv.DictReader((our_run / "summary" / "needlebench_summary.csv").open(encoding="utf-8"))
    }
    label = {"srt": "S-RT", "mrs": "M-RS"}
    compared = 0
    for (task, lang, length), kinds in sorted(cell_kinds.items()):
        if task not in label or kinds != {"identical, same score"}:
            continue
        kind = "origin" if task == "srt" else "2needle"
        theirs_cell = [float(oc[(f"Length{length}Depth{d}_{kind}_{lang}_4k", "score")]) for d in (0, 50, 100)]
        ours_cell = float(table[(label[task], lang.upper(), str(length))]["scripted"])
        assert ours_cell == pytest.approx(sum(theirs_cell) / 3, abs=0.01), (task, lang, length)
        compared += 1
    # ATC (every prompt identical): OpenCompass's dataset per N against our dataset's accuracy at N
    (ours_csv,) = (our_run / "summary").glob("summary_*.csv")
    mine = {(r["dataset"], r["metric"]): r["scripted"] for r in csv.DictReader(ours_csv.open(encoding="utf-8"))}
    for n in (2, 4, 8):
        theirs_n = float(oc[(f"NeedleBenchATCDataset-{n}Needle-EN", "score")])
        assert float(mine[("needlebench_atc_en", f"needles_{n}")]) == pytest.approx(theirs_n, abs=0.01), n
        compared += 1
    print(f"summary cells equal in both: {compared}")
    assert compared >= 5
