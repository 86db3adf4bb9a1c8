"""Differential prompt test: OpenCompass 0.5.4's own loaders and ours, from the same files, byte for byte.

Stand-in files in OpenCompass's formats (``PaulGrahamEssays.jsonl``,
``zh_finance.jsonl``, ``needles.jsonl``, ``names.json``) go into a data
folder. OpenCompass's installed ``needlebench_v2`` loaders build every dataset
of a suite from its own config files (lengths, depths, buffers, repeats,
needle counts); ours builds the same cells with ``protocol="reference"`` and
``corpus="opencompass"``. Whole prompts are compared unmasked, and golds too.

A prompt that differs must be explained by a listed exception
(``../shared/spec/needlebench.md`` section 8; docs/protocol/differences.md), checked by rebuilding OpenCompass's own
output with that one fix applied here, independently of our code:

* ``buffer_shrink``: the same cell as OpenCompass's own 4k suite builds it,
  from its own config file (its 3000-token English buffer leaves 1k/2k
  prompts of 32k+ suites empty; its short suites use 500 there);
* ``split``: a needle that OpenCompass put inside a word or a character,
  moved to the nearest token boundary of its haystack that splits neither;
* ``wrap``: a haystack longer than the corpus (English 1000k) goes round the
  repeat's document order again: OpenCompass's loader rerun on a corpus file
  that holds the documents twice, its generator shuffling the first copy as it
  shuffles the documents and the second following in the same order.

Every byte of a prompt that no exception explains is counted and printed
(it must be zero), and so is each task's share of byte-identical prompts.

OpenCompass's M-RT draws its needle set with the unseeded global generator;
its module's ``random`` is replaced by a ``random.Random(seed)`` (``seeded``:
the same algorithm, seeded). Every OpenCompass module gets a private
generator, so the global state is never touched.

The 2024 protocol (``profile="v1"``) is compared the same way with OpenCompass's
``needlebench`` configs and v1 loaders (``test_v1_*``, below), ATC multiple
choice included; its listed exceptions are ``split``, ``buffer_shrink`` (checked
only where OpenCompass's own context holds no haystack) and ``start_tuple``.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from needlebench.context import corpora, haystack
from needlebench.context.tokenizer import get_encoding
from needlebench.parity import TokenRecorder
from needlebench.tasks import get_task, kinship, make_params
from needlebench.tasks.sparse import needles
from needlebench.tasks.sparse.alignment import (
    WrappingRandom,
    needle_texts,
    opencompass_answer,
    ours_for_cells,
    rebuild_split,
    row_key,
)

ENC = get_encoding("cl100k_base")  # also places the offline BPE file where tiktoken looks for it
LANGUAGE = {"English": "en", "Chinese": "zh"}
FILES = {"srt": "single", "mrt": "multi_retrieval", "mrs": "multi_reasoning"}
CORPUS_FILES = ("PaulGrahamEssays.jsonl", "zh_finance.jsonl")
# (suite, the (length, depth) cells to build: None = all). The long suites are sampled: OpenCompass's loaders
# take seconds a cell there
SUITES: dict[str, Any] = {
    "4k": None,
    "8k": None,
    "32k": {(1000, 0), (2000, 50), (32000, 100)},
    "128k": {(2000, 100), (128000, 50)},
    "200k": {(1000, 30), (200000, 90)},
    "256k": {(256000, 20)},
    "1000k": {(1000, 60), (1000000, 40)},
}
_SAMPLED_REPEATS = 2  # repeats of a sampled (32k+) cell


def _config_dir() -> Path:
    import opencompass

    return Path(opencompass.__file__).parent / "configs" / "datasets" / "needlebench_v2"


def _oc_cells(suite: str, task: str) -> list[dict]:
    """The dataset entries of one OpenCompass v2 suite config, without their reader/infer/eval parts."""
    return _config_cells(_config_dir() / f"needlebench_v2_{suite}" / f"needlebench_v2_{FILES[task]}_{suite}.py")


def _config_cells(path: Path) -> list[dict]:
    """The dataset entries of one OpenCompass config file, without their reader/infer/eval parts."""
    from mmengine.config import Config

    cfg = Config.fromfile(str(path))
    out = []
    for key in cfg:
        if key.endswith("_datasets"):
            out += [{k: v for k, v in d.items() if not k.endswith("_cfg") and k != "abbr"} for d in cfg[key]]
    return out


_ENCODED: dict[str, list[int]] = {}


def _run_oc(
    cell: dict, folder: Path, seed: int = 0, rng: random.Random | None = None
) -> list[tuple[str, str, list[int]]]:
    """OpenCompass's loader on one config entry: (prompt, answer, decoded token list) per row."""
    from opencompass.datasets.needlebench_v2 import multi, origin, parallel

    module = {"NeedleBenchOriginDataset": origin, "NeedleBenchParallelDataset": parallel}.get(
        cell["type"].__name__, multi
    )
    recorder = TokenRecorder(_ENCODED)
    args = {k: v for k, v in cell.items() if k != "type"}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(module, "random", rng or random.Random(seed))  # private and seeded: the global state stays as it is
        mp.setattr(module, "tiktoken", SimpleNamespace(encoding_for_model=lambda name: recorder))
        mp.setattr(module, "get_data_path", lambda path, *a, **k: str(folder), raising=False)
        mp.setattr(multi, "hf_hub_download", lambda repo_id, filename, repo_type: str(folder / filename))
        rows = cell["type"].load(**args)
    return [(r["prompt"], r["answer"], t) for r, t in zip(rows, recorder.decoded, strict=True)]


# -- the fixes, rebuilt here from OpenCompass's token list --------------------------------------------------------


def _rebuild(tokens: list[int], needle_texts: list[str]) -> tuple[str, set[str]]:
    """OpenCompass's context with the fix applied (``rebuild_split``, from its token list): needles moved off
    split points."""
    fixed, moves = rebuild_split(tokens, needle_texts)
    return fixed, {"split"} if any(moves) else set()


# -- ours ---------------------------------------------------------------------------------------------------------


def _wanted(cell: dict, task: str, suite: str) -> bool:
    """Whether a config entry is one of the cells a sampled suite builds (M-RT, which has no depth cells: one
    of the wanted cells' lengths)."""
    wanted = SUITES[suite]
    if wanted is None:
        return True
    if task == "mrt":
        return cell["length"] in {length for length, _ in wanted}
    return (cell["length"], cell.get("depth")) in wanted


def _compare(task: str, suite: str, folder: Path, counts: Counter, unattributed: list[int]) -> list[str]:
    failures: list[str] = []
    wanted = SUITES[suite]
    for cells in _by_lang(_oc_cells(suite, task)):
        cells = [c for c in cells if _wanted(c, task, suite)]
        if not cells:
            continue
        lang = LANGUAGE[cells[0]["language"]]
        repeats = cells[0]["num_repeats_per_file"] if wanted is None else _SAMPLED_REPEATS
        for position in ("End", "Start"):
            if position == "Start":
                # the same haystack under the other template: its shortest length, every depth, two repeats
                shortest = min(c["length"] for c in cells)
                cells = [c for c in cells if c["length"] == shortest]
                repeats = min(repeats, _SAMPLED_REPEATS)
            posed = [{**c, "num_repeats_per_file": repeats, "quesiton_position": position} for c in cells]
            ours = ours_for_cells("v2", task, lang, posed, repeats)
            for cell in posed:
                for repeat, (prompt, answer, tokens) in enumerate(_run_oc(cell, folder)):
                    key = row_key(task, {**cell, "repeat": repeat})
                    mine = ours[key]
                    where = f"{task} {suite} {lang} {position} {key}"
                    if opencompass_answer("v2", task, mine) != answer:
                        failures.append(f"{where}: gold {opencompass_answer('v2', task, mine)!r} != {answer!r}")
                    tag, rest = _explain(task, cell, folder, prompt, tokens, mine)
                    counts[(task, tag)] += 1
                    if tag == "UNATTRIBUTED":
                        unattributed.append(_differing_bytes(mine.prompt, rest))
                        failures.append(f"{where}: prompt differs\n ours {mine.prompt[:3000]!r}\n  oc {rest[:3000]!r}")
    return failures


def _differing_bytes(ours: str, theirs: str) -> int:
    """Bytes of the longer prompt between the two prompts' common prefix and common suffix."""
    a, b = ours.encode(), theirs.encode()
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return max(len(a), len(b)) - head - tail


def _by_lang(cells: list[dict]) -> Iterator[list[dict]]:
    for language in ("English", "Chinese"):
        yield [c for c in cells if c["language"] == language]


def _short_suite_cell(task: str, cell: dict) -> dict:
    """The entry of OpenCompass's own 4k suite config for the same cell (its buffer is the one it uses there)."""
    same = [
        c
        for c in _oc_cells("4k", task)
        if all(c.get(k) == cell.get(k) for k in ("language", "length", "depth", "num_needles", "depths", "diff"))
    ]
    assert len(same) == 1, (task, cell["length"], cell.get("depth"), len(same))
    return {**same[0], "quesiton_position": cell.get("quesiton_position", "End")}


def _explain(task: str, cell: dict, folder: Path, prompt: str, tokens: list[int], mine: Any) -> tuple[str, str]:
    """Why our prompt differs from OpenCompass's: ``identical``, the fixes that explain it, or ``UNATTRIBUTED``;
    and OpenCompass's prompt with those fixes applied (equal to ours unless unattributed)."""
    if mine.prompt == prompt:
        return ("seeded" if task == "mrt" else "identical"), prompt
    tags: set[str] = set()
    if mine.meta.get("buffer_shrunk"):
        # the cell as OpenCompass's own 4k suite builds it, from its config file (not from our recorded buffer)
        short = _short_suite_cell(task, cell)
        short["num_repeats_per_file"] = mine.meta["repeat"] + 1
        prompt, _, tokens = _run_oc(short, folder)[mine.meta["repeat"]]
        tags.add("buffer_shrink")
    texts = needle_texts(task, mine)
    if mine.prompt != prompt and len(tokens) - sum(len(ENC.encode(t)) for t in texts) < mine.meta["haystack_tokens"]:
        # OpenCompass's haystack ran out of documents: its loader on the corpus read twice
        wrapped = folder.parent / "wrapped"
        docs = len((folder / cell["file_list"][0]).read_text(encoding="utf-8").splitlines())
        short = {**cell, "num_repeats_per_file": mine.meta["repeat"] + 1}
        prompt, _, tokens = _run_oc(short, wrapped, rng=WrappingRandom(docs))[mine.meta["repeat"]]
        tags.add("wrap")
    if mine.prompt != prompt:
        context = ENC.decode(tokens)
        fixed, more = _rebuild(tokens, texts)
        tags |= more
        prompt = prompt.replace(context, fixed, 1)
    if mine.prompt != prompt or not tags:
        return "UNATTRIBUTED", prompt
    return "+".join(sorted(tags)), prompt


@pytest.fixture(scope="module")
def oc_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from bench.standin import build_standin

    root = tmp_path_factory.mktemp("oc")
    folder = build_standin(root)
    wrapped = folder.parent / "wrapped"  # the same files, each corpus file holding its documents twice
    wrapped.mkdir()
    for path in folder.iterdir():
        text = path.read_text(encoding="utf-8")
        (wrapped / path.name).write_text(text + text if path.name in CORPUS_FILES else text, encoding="utf-8")
    caches = (corpora.load_corpus, corpora.corpus_digest, haystack.load_tokenized, needles.load_needle_bank)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)  # ./data/needlebench, where OpenCompass users keep the files
        for c in caches:
            c.cache_clear()
        kinship.load_name_list.cache_clear()
        yield folder
    for c in caches:
        c.cache_clear()
    kinship.load_name_list.cache_clear()


_COUNTS: Counter = Counter()  # (task, tag) over the suites built in full, and ATC
_SAMPLED_COUNTS: Counter = Counter()  # over the cells sampled from the long suites (chosen for their fixes)
_UNATTRIBUTED_BYTES: list[int] = []
_SPARSE = ("srt", "mrt", "mrs")
# the share of byte-identical prompts each task keeps over the 4k and 8k suites (M-RT: once seeded; every other
# prompt differs by `split` alone). Measured: S-RT 90.2%, M-RT 42.8%, M-RS 74.1%, ATC 100%: an M-RS prompt holds
# 2-5 needles, each of which may land inside a word or a character, so `split` moves one in 25.9% of them
IDENTICAL_SHARE = {"srt": 0.9, "mrt": 0.4, "mrs": 0.7, "atc": 1.0}
ALLOWED_TAGS = {
    "srt": {"identical", "split", "buffer_shrink", "buffer_shrink+split", "wrap", "split+wrap"},
    "mrt": {"seeded", "split", "buffer_shrink", "buffer_shrink+split", "wrap", "split+wrap"},
    "mrs": {"identical", "split", "buffer_shrink", "buffer_shrink+split", "wrap", "split+wrap"},
    "atc": {"identical"},
}


@pytest.mark.parametrize("suite", list(SUITES))
@pytest.mark.parametrize("task", _SPARSE)
def test_sparse_prompts_match_opencompass(oc_folder: Path, task: str, suite: str) -> None:
    start = time.perf_counter()
    counts: Counter = Counter()
    unattributed: list[int] = []
    failures = _compare(task, suite, oc_folder, counts, unattributed)
    (_COUNTS if SUITES[suite] is None else _SAMPLED_COUNTS).update(counts)
    _UNATTRIBUTED_BYTES.extend(unattributed)
    print(
        f"\n{task} {suite}: {dict(counts)}, {sum(unattributed)} unattributed bytes in {time.perf_counter() - start:.1f} s"
    )
    assert not failures, f"{len(failures)} unattributed prompts or golds; first:\n" + "\n".join(failures[:3])
    assert sum(counts.values()) > 0
    assert {tag for _, tag in counts} <= ALLOWED_TAGS[task], counts


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_atc_prompts_match_opencompass(oc_folder: Path, lang: str) -> None:
    """ATC, every needle count, question type and repeat of OpenCompass's config: identical prompts and golds."""
    from mmengine.config import Config

    cfg = Config.fromfile(str(_config_dir() / "atc" / "atc_0shot_nocot_2_power_en.py"))
    cells = [
        {k: v for k, v in d.items() if not k.endswith("_cfg") and k != "abbr"} for d in cfg["needlebench_datasets"]
    ]
    counts = tuple(c["num_needles"] for c in cells)
    params = make_params("atc", lang=lang, needle_counts=counts, repeats=cells[0]["repeats"], corpus="opencompass")
    ours = {
        (s.meta["num_needles"], s.meta["question_type"], s.meta["repeat"]): s for s in get_task("atc").generate(params)
    }
    from opencompass.datasets.needlebench_v2 import atc

    tally: Counter = Counter()
    for cell in cells:
        args = {k: v for k, v in cell.items() if k != "type"}
        args["language"] = {"en": "English", "zh": "Chinese"}[lang]
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(atc, "random", random.Random(0))
            mp.setattr(atc, "get_data_path", lambda path, *a, **k: str(oc_folder))
            rows = cell["type"].load(**args)
        seen: Counter = Counter()
        for row in rows:
            qtype = row["question_type"].lower()
            repeat = seen[qtype]
            seen[qtype] += 1
            mine = ours[(cell["num_needles"], qtype, repeat)]
            assert mine.prompt == row["prompt"], (cell["num_needles"], qtype, repeat)
            assert mine.gold["answer"] == row["answer"]
            tally["identical"] += 1
    _COUNTS.update({("atc", tag): n for tag, n in tally.items()})
    print(f"\natc {lang}: {dict(tally)}")
    assert tally["identical"] == len(ours) == len(counts) * 4 * cells[0]["repeats"]


# -- v1: OpenCompass's 2024 loaders (``opencompass.datasets.needlebench``) and ``profile="v1"`` ---------------------
#
# The same comparison for the 2024 protocol: OpenCompass's ``needlebench`` configs (``guide=True``, question at the
# end) built by its v1 loaders ``origin.py`` (S-RT), ``parallel.py`` (M-RT) and ``multi.py`` (M-RS from
# ``multi_needle_reasoning_{en,zh}.json``), against ours with ``profile="v1"``. Listed exceptions: ``split`` (as
# above); ``buffer_shrink``, only where OpenCompass's own context is the needles alone (its 4k English M-RT asks a
# 1000-token buffer at length 1000), checked by rerunning its loader with our buffer; and ``start_tuple``:
# OpenCompass's Chinese "start" S-RT and M-RS prompt is a tuple of two strings (its dataset holds a list, which
# the prompt template renders as the list's repr); we join the two parts. Its M-RT needle set is ``seeded`` as
# for v2; its M-RS needles are placed as ``multi.py`` places them (no exception).

_V1_4K_DEPTHS = (0, 5, 10, 15, 21, 26, 31, 36, 42, 47, 52, 57, 63, 68, 73, 78, 84, 89, 94, 100)
# suite -> the (length, depth) cells built (None: all; or per task) and the repeats of each (default: the config's)
V1_SAMPLES: dict[str, tuple[Any, dict[str, int] | None]] = {
    # 4k: S-RT and M-RT every cell (S-RT 5 of its 10 repeats, M-RT all 25); M-RS every depth at 1k and 4k, 2 repeats
    "4k": ({"mrs": {(n, d) for n in (1000, 4000) for d in _V1_4K_DEPTHS}}, {"srt": 5, "mrs": 2}),
    "8k": ({(5000, 0), (6000, 36), (7000, 73), (8000, 100)}, None),
    "32k": ({(9000, 0), (21000, 52), (32000, 100)}, None),
    "128k": ({(16000, 94), (128000, 42)}, None),
    "200k": ({(16000, 31), (200000, 84)}, None),
    "256k": ({(32000, 63)}, None),
    "1000k": ({(20000, 21)}, None),
}
_V1_SAMPLED_REPEATS = 2  # repeats of a sampled cell, of the "start" and of the guide=False variants
_V1_LONG = 100_000  # a sampled cell this long gets one repeat, at the end position only


def _v1_config_dir() -> Path:
    return _config_dir().parent / "needlebench"


def _oc_v1_cells(suite: str, task: str, raw: bool = False) -> list[dict]:
    """The dataset entries of one OpenCompass v1 suite config (``raw``: its ``*_rawprompt.py`` twin), without
    their reader/infer/eval parts."""
    name = f"needlebench_{FILES[task]}_{suite}{'_rawprompt' if raw else ''}.py"
    return _config_cells(_v1_config_dir() / f"needlebench_{suite}" / name)


def _run_oc_v1(cell: dict, folder: Path) -> list[tuple[str, str, list[int], bool]]:
    """OpenCompass's v1 loader on one config entry: (prompt, answer, decoded token list, built as a tuple) per row."""
    from opencompass.datasets.needlebench import multi, origin, parallel

    module = {"NeedleBenchOriginDataset": origin, "NeedleBenchParallelDataset": parallel}.get(
        cell["type"].__name__, multi
    )
    recorder = TokenRecorder(_ENCODED)
    args = {k: v for k, v in cell.items() if k != "type"}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(module, "random", random.Random(0))  # private and seeded: the global state stays untouched
        mp.setattr(module, "tiktoken", SimpleNamespace(encoding_for_model=lambda name: recorder))
        mp.setattr(module, "get_data_path", lambda path, *a, **k: str(folder))
        rows = cell["type"].load(**args)
    out = []
    for row, tokens in zip(rows, recorder.decoded, strict=True):
        prompt = row["prompt"]
        tupled = not isinstance(prompt, str)  # the Chinese "start" tuple, stored by the dataset as a list
        out.append(("".join(prompt) if tupled else prompt, row["answer"], tokens, tupled))
    return out


def _explain_v1(task: str, cell: dict, folder: Path, oc: tuple[str, str, list[int], bool], mine: Any) -> str:
    """``identical`` (``seeded`` for M-RT), the listed fixes that explain a difference, or ``UNATTRIBUTED``."""
    prompt, _, tokens, tupled = oc
    tags = {"start_tuple"} if tupled else set()
    if mine.prompt == prompt:
        return "+".join(sorted(tags)) or ("seeded" if task == "mrt" else "identical")
    texts = [f"\n{t}\n" for t in mine.meta["statements"]] if task == "mrs" else needle_texts(task, mine)
    if mine.meta.get("buffer_shrunk"):
        # only where the defect is: OpenCompass's own context holds the needles and no haystack at all
        if len(tokens) != sum(len(ENC.encode(t)) for t in texts):
            return "UNATTRIBUTED"
        repeat = mine.meta["repeat"]
        rerun = {**cell, "length_buffer": mine.meta["buffer"], "num_repeats_per_file": repeat + 1}
        prompt, _, tokens, _ = _run_oc_v1(rerun, folder)[repeat]
        tags.add("buffer_shrink")
    if mine.prompt != prompt:
        fixed, more = _rebuild(tokens, texts)
        prompt = prompt.replace(ENC.decode(tokens), fixed, 1)
        tags |= more
    if mine.prompt != prompt or not tags - {"start_tuple"}:
        return "UNATTRIBUTED"
    return "+".join(sorted(tags))


def _v1_variants(cells: list[dict], repeats: int) -> Iterator[tuple[list[dict], int]]:
    """The config's own cells (guide on, question at the end), then "start" and guide=False on its shortest
    length (every fourth depth there)."""
    shortest = min(c["length"] for c in cells)
    depths = sorted({c.get("depth", 0) for c in cells})[::4]
    short = [c for c in cells if c["length"] == shortest and c.get("depth", 0) in depths]
    yield cells, repeats
    for position, guide in (("Start", True), ("End", False)):
        yield [{**c, "position": position, "guide": guide} for c in short], min(repeats, _V1_SAMPLED_REPEATS)


def _compare_v1(task: str, suite: str, folder: Path, counts: Counter) -> list[str]:
    failures: list[str] = []
    wanted, task_repeats = V1_SAMPLES[suite]
    if isinstance(wanted, dict):
        wanted = wanted.get(task)
    for cells in _by_lang(_oc_v1_cells(suite, task)):
        lang = LANGUAGE[cells[0]["language"]]
        repeats = (task_repeats or {}).get(task, cells[0]["num_repeats_per_file"])
        if wanted is not None:  # M-RT has no depth cells: its sampled lengths are those of the wanted cells
            lengths = {length for length, _ in wanted}
            cells = [
                c
                for c in cells
                if (c["length"], c.get("depth")) in wanted or (task == "mrt" and c["length"] in lengths)
            ]
            repeats = (task_repeats or {}).get(task, _V1_SAMPLED_REPEATS)
        groups: list[tuple[list[dict], int]] = []
        long = [c for c in cells if c["length"] >= _V1_LONG]
        if long:  # one repeat of the long cells, the end position only
            groups.append((long, 1))
            cells = [c for c in cells if c["length"] < _V1_LONG]
        if cells:
            groups += list(_v1_variants(cells, repeats))
        for posed, reps in groups:
            posed = [{**c, "num_repeats_per_file": reps} for c in posed]
            ours = ours_for_cells("v1", task, lang, posed, reps)
            for cell in posed:
                for repeat, oc in enumerate(_run_oc_v1(cell, folder)):
                    key = row_key(task, {**cell, "repeat": repeat})
                    mine = ours[key]
                    where = f"v1 {task} {suite} {lang} {cell.get('position', 'End')} guide={cell['guide']} {key}"
                    if opencompass_answer("v1", task, mine) != oc[1]:
                        failures.append(f"{where}: gold {opencompass_answer('v1', task, mine)!r} != {oc[1]!r}")
                    tag = _explain_v1(task, cell, folder, oc, mine)
                    counts[(task, tag)] += 1
                    if tag == "UNATTRIBUTED":
                        failures.append(f"{where}: prompt differs\n ours {mine.prompt[:3000]!r}\n  oc {oc[0][:3000]!r}")
    return failures


_V1_COUNTS: Counter = Counter()


@pytest.mark.parametrize("suite", list(V1_SAMPLES))
@pytest.mark.parametrize("task", ["srt", "mrt", "mrs"])
def test_v1_sparse_prompts_match_opencompass(oc_folder: Path, task: str, suite: str) -> None:
    """``profile="v1"``: OpenCompass v1's bytes and golds from the same files, every difference a listed fix."""
    start = time.perf_counter()
    counts: Counter = Counter()
    failures = _compare_v1(task, suite, oc_folder, counts)
    _V1_COUNTS.update(counts)
    same = counts[(task, "seeded" if task == "mrt" else "identical")]
    total = sum(counts.values())
    print(
        f"\nv1 {task} {suite}: {dict(counts)}, {same}/{total} byte-identical"
        f" ({100 * same / max(total, 1):.1f}%) in {time.perf_counter() - start:.1f} s"
    )
    assert not failures, f"{len(failures)} unattributed prompts or golds; first:\n" + "\n".join(failures[:3])
    assert total > 0


@pytest.mark.parametrize("suite", list(V1_SAMPLES))
def test_v1_rawprompt_prompts_match_opencompass(oc_folder: Path, suite: str) -> None:
    """OpenCompass 0.5.4's ``*_rawprompt.py`` configs (``template="raw"``): a sampled cell of every v1 suite, each
    task and language, built by OpenCompass's loader from the raw-prompt config's own entry and by ours; every
    difference a listed fix (the message around the prompt: ``tests/test_model_input.py``)."""
    counts: Counter = Counter()
    failures = []
    wanted, _ = V1_SAMPLES[suite]
    for task in ("srt", "mrt", "mrs"):
        picks = wanted.get(task) if isinstance(wanted, dict) else wanted
        length, depth = max(picks) if picks else (None, None)  # the longest sampled cell (4k: all of them)
        for cells in _by_lang(_oc_v1_cells(suite, task, raw=True)):
            lang = LANGUAGE[cells[0]["language"]]
            chosen = [c for c in cells if length is None or c["length"] == length]
            chosen = [c for c in chosen if task == "mrt" or depth is None or c.get("depth") == depth][:1]
            posed = [{**c, "num_repeats_per_file": 1} for c in chosen]
            ours = ours_for_cells("v1", task, lang, posed, 1)
            for cell in posed:
                for repeat, oc in enumerate(_run_oc_v1(cell, oc_folder)):
                    mine = ours[row_key(task, {**cell, "repeat": repeat})]
                    tag = _explain_v1(task, cell, oc_folder, oc, mine)
                    counts[(task, lang, tag)] += 1
                    if tag == "UNATTRIBUTED" or opencompass_answer("v1", task, mine) != oc[1]:
                        failures.append(f"raw v1 {task} {suite} {lang} {cell['length']}: {tag}")
    print(f"\nraw v1 {suite}: {dict(counts)}")
    assert not failures, "\n".join(failures)
    assert {(t, lang) for t, lang, _ in counts} == {(t, lang) for t in ("srt", "mrt", "mrs") for lang in ("en", "zh")}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_v1_atc_choice_prompts_match_opencompass(oc_folder: Path, lang: str) -> None:
    """The 2024 multiple-choice ATC (``atc_choice_20``): every question, rotation, gold and few-shot turn, identical."""
    from mmengine.config import Config
    from opencompass.datasets.needlebench import atc_choice

    from needlebench.tasks.atc.choice import few_shot_rounds

    cfg = Config.fromfile(str(_v1_config_dir() / "atc" / "atc_choice_20.py"))
    tally: Counter = Counter()
    for d in cfg["needlebench_datasets"]:
        if d["language"] != {"en": "English", "zh": "Chinese"}[lang]:
            continue
        style = "reasoning" if d["abbr"].endswith("-Reasoning") else "direct"
        rounds = list(d["infer_cfg"]["prompt_template"]["template"]["round"])
        steps = d["num_needles"]
        args = {k: v for k, v in d.items() if k not in ("type", "abbr") and not k.endswith("_cfg")}
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(atc_choice, "random", random.Random(0))
            mp.setattr(atc_choice, "get_data_path", lambda path, *a, **k: str(oc_folder))
            rows = d["type"].load(**args)
        params = make_params(
            "atc_mc", lang=lang, steps=(steps,), style=style, repeats=d["repeats"], corpus="opencompass"
        )
        ours = list(get_task("atc_mc").generate(params))
        assert len(ours) == len(rows) == 4 * d["repeats"]
        shots = [dict(r) for r in rounds[:-1]]
        assert few_shot_rounds(lang, style, len(shots) // 2) == shots
        for mine, row in zip(ours, rows, strict=True):
            qid, letter, pattern = row["answer"].split("--")
            assert mine.prompt == rounds[-1]["prompt"].replace("{question}", row["question"]), (steps, qid, pattern)
            assert (mine.gold["answer"], mine.meta["circular_pattern"], mine.meta["repeat"]) == (
                letter,
                pattern,
                int(qid),
            )
            assert mine.gold["options"] == list(row["options"])
            tally["identical"] += 1
    print(f"\nv1 atc_choice {lang}: {dict(tally)}")
    assert tally["identical"] == 2 * 18 * 10 * 4  # two styles, 2..19 people, 10 questions, 4 rotations


def test_v1_chinese_start_prompt_reaches_the_model_as_a_list_repr(oc_folder: Path) -> None:
    """The evidence for ``start_tuple``: OpenCompass v1 renders its Chinese "start" prompt as a Python list's repr."""
    from opencompass.datasets.needlebench import origin
    from opencompass.openicl.icl_prompt_template import PromptTemplate

    cell = next(
        c for c in _oc_v1_cells("4k", "srt") if c["language"] == "Chinese" and c["length"] == 1000 and c["depth"] == 0
    )
    args = {k: v for k, v in cell.items() if k != "type"} | {"position": "Start", "num_repeats_per_file": 1}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(origin, "random", random.Random(0))
        mp.setattr(origin, "tiktoken", SimpleNamespace(encoding_for_model=lambda name: TokenRecorder(_ENCODED)))
        mp.setattr(origin, "get_data_path", lambda path, *a, **k: str(oc_folder))
        row = cell["type"].load(**args)[0]
    assert isinstance(row["prompt"], list) and len(row["prompt"]) == 2  # the tuple, stored as a list
    template = PromptTemplate(template=dict(round=[dict(role="HUMAN", prompt="{prompt}")]))
    sent = template.generate_item({"prompt": row["prompt"], "answer": row["answer"]})[1]["prompt"]
    assert sent == str(row["prompt"]) and sent[0] == "[" and sent[-1] == "]"  # the repr: brackets, quotes, \\n
    params = make_params(
        "srt",
        lang="zh",
        lengths=(1000,),
        depths=(0,),
        repeats=1,
        buffer=cell["length_buffer"],
        corpus="opencompass",
        question_position="start",
        profile="v1",
        recall_step=cell["guide"],
    )
    (ours,) = get_task("srt").generate(params)
    assert ours.prompt == "".join(row["prompt"])  # ours: the two parts joined


def test_share_of_identical_prompts_per_task() -> None:
    """After the comparisons above (this file's order): zero unattributed bytes, and per task the share of
    prompts byte-identical to OpenCompass's (M-RT: once its needle draw is seeded), printed and held over the
    suites built in full (every prompt of 4k and 8k, and ATC); the long suites' sampled cells, chosen for the
    fixes they need, are printed beside."""
    missing = [t for t in IDENTICAL_SHARE if not any(task == t for task, _ in _COUNTS)]
    if missing:
        pytest.skip(f"run the whole file: no comparison of {missing} ran in this session")
    print(f"\nunattributed bytes: {sum(_UNATTRIBUTED_BYTES)} in {len(_UNATTRIBUTED_BYTES)} prompts")
    for task, share in IDENTICAL_SHARE.items():
        tags = Counter({tag: n for (t, tag), n in _COUNTS.items() if t == task})
        same = tags["identical"] + tags["seeded"]
        total = sum(tags.values())
        sampled = {tag: n for (t, tag), n in _SAMPLED_COUNTS.items() if t == task}
        print(
            f"{task}: {same} of {total} prompts byte-identical ({same / total:.1%}): {dict(tags)}; sampled: {sampled}"
        )
        assert same >= share * total, (task, same, total)
    assert not _UNATTRIBUTED_BYTES
