"""Ours next to OpenCompass's own NeedleBench v2, both through the real ``opencompass``, from the same files.

OpenCompass-format stand-in files go where both look for them (``$COMPASS_DATA_CACHE/data/needlebench``,
and a Hugging Face hub cache for the files OpenCompass's M-RS loader fetches from the hub). The same
prompt-scripted model (``tests/prompt_scripted.py``: its answer is a function of the prompt alone)
answers a slice of the 4k suite in OpenCompass's unmodified built-in configs (``side_builtin.py``) and
in ours with ``corpus="opencompass"`` (``side_ours.py``). Then, sample by sample:

* a prompt identical on both sides must get the same score;
* a prompt that differs must be a listed exception: OpenCompass's unseeded M-RT needle draw, or a
  needle our fix moved (one that would split a word or character; M-RS spacing) — checked by the two
  prompts being equal once the needle texts are taken out;

and every summary cell whose prompts are all identical must hold the same score in OpenCompass's
summary and in ``needlebench_summary.csv``. The counts per kind are printed.
"""

from __future__ import annotations

import ast
import csv
import difflib
import json
import os
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from conftest import ROOT, run_opencompass

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
    builtin = run_opencompass("tests/configs/side_builtin.py", root / "builtin", env=env)
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
    """OpenCompass's samples by coordinates: prompt and score (M-RT: prompt only, its scores are per depth)."""
    out: dict[tuple, dict] = {}
    folder = run / "predictions" / "scripted"
    for path in sorted(folder.glob("*.json")):
        m = _OC_NAME.fullmatch(path.stem)
        assert m, path.name
        preds = _predictions(path)
        result = json.loads((run / "results" / "scripted" / path.name).read_text(encoding="utf-8"))
        details = result.get("details") if isinstance(result.get("details"), list) else None
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
            out[key] = {"prompt": _prompt(pred["origin_prompt"]), "score": score}
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
            if r["task"] == "atc":
                key: tuple = ("atc", r["lang"], r["num_needles"], r["question_type"], r["repeat"])
            elif r["task"] == "mrt":
                key = ("mrt", r["lang"], r["length"], r["repeat"])
            else:
                key = (r["task"], r["lang"], r["length"], r["depth"], r["repeat"])
            out[key] = {
                "prompt": _prompt(pred["origin_prompt"]),
                "score": float(r["score"]),
                "gold": json.loads(pred["gold"]),
            }
    return out


def _without(text: str, needles: list[str], names: list[str]) -> str:
    """The prompt without its needles: the needle texts removed, and each line naming a chain person (an
    M-RS statement sits on a line of its own), whitespace ignored."""
    for needle in sorted(needles, key=len, reverse=True):
        text = text.replace(needle, "")
    text = "\n".join(line for line in text.split("\n") if not any(n in line for n in names))
    return re.sub(r"\s+", "", text)


def _document(prompt: str) -> str:
    """The text between the document delimiters (English or Chinese)."""
    m = re.search(r"<(Document|文档)>(.*)</\1>", prompt, re.S)
    assert m, prompt[:200]
    return m.group(2)


def _only_split_characters(ours: str, theirs: str, prefix: bool = False) -> bool:
    """The texts are equal, or differ only where OpenCompass's needle split a character: a few characters
    around a U+FFFD on its side (the bytes of the character it cut), the character whole on ours. With
    ``prefix``, one may also run on past the other's end (a haystack cut elsewhere)."""
    if ours == theirs:
        return True
    ops = difflib.SequenceMatcher(None, ours, theirs, autojunk=False).get_opcodes()
    return all(
        tag == "equal"
        or ("\ufffd" in theirs[j1:j2] and max(i2 - i1, j2 - j1) <= 4)
        or (prefix and (i2 == len(ours) or j2 == len(theirs)))
        for tag, i1, i2, j1, j2 in ops
    )


def test_same_inputs_same_scores_as_opencompass(runs: tuple[Path, Path, Path]) -> None:
    builtin_run, our_run, data = runs
    theirs, ours = _builtin_samples(builtin_run), _our_samples(our_run)
    bank = [json.loads(x)["needle"] for x in (data / "needles.jsonl").read_text(encoding="utf-8").splitlines()]
    # ATC: OpenCompass's rows matched to ours by prompt (every ATC prompt is identical: test_differential_prompts)
    by_prompt = {v["prompt"]: k for k, v in ours.items() if k[0] == "atc"}
    theirs = {(by_prompt.get(v["prompt"], k) if k[0] == "atc" else k): v for k, v in theirs.items()}
    assert set(theirs) == set(ours), sorted(set(theirs) ^ set(ours))[:5]
    kinds: Counter = Counter()
    cell_kinds: dict[tuple, set] = defaultdict(set)
    per_sample: dict[tuple, str] = {}
    for key, mine in ours.items():
        other = theirs[key]
        cell = (key[0], key[1], key[2])
        if mine["prompt"] == other["prompt"]:
            kind = "identical"
            if other["score"] is not None:
                assert mine["score"] == other["score"], (key, mine["score"], other["score"])
                kind = "identical, same score"
        else:
            task, gold = key[0], mine["gold"]
            needles = bank if task == "mrt" else [gold["needle"]] if task == "srt" else []
            names = gold.get("chain_names", []) if task == "mrs" else []
            a, b = (_without(x["prompt"], needles, names) for x in (mine, other))
            if task == "mrt":  # other needles: other questions, and the haystack cut where their tokens leave room
                a, b = (_without(_document(x["prompt"]), needles, names) for x in (mine, other))
            assert _only_split_characters(a, b, prefix=task == "mrt"), key
            kind = "unseeded M-RT draw" if task == "mrt" else "needle moved by a listed fix"
        kinds[kind] += 1
        cell_kinds[cell].add(kind)
        per_sample[key] = kind
    print(f"\nside by side, {len(ours)} samples: {dict(kinds)}")
    same = Counter(key[0] for key, k in per_sample.items() if k == "identical, same score")
    print(f"identical prompts with the same score, per task: {dict(same)}")
    assert all(same[task] >= 20 for task in ("srt", "mrs", "atc"))  # every scored family compared sample by sample
    _same_cells(builtin_run, our_run, theirs, cell_kinds)


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
