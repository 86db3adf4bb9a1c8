"""Ids and caches: one hash algorithm, hashing by value, keys that cover code and data,
corrupt files rebuilt, atomic writes, and one build under concurrency."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from needlebench import files as store
from needlebench.cache.rows import load_rows
from needlebench.context import haystack
from needlebench.opencompass import dataset as oc_dataset
from needlebench.seeding import canonical, content_digest, rng, stable_hash
from needlebench.tasks import config_params
from needlebench.tasks.sparse.retrieval import SparseParams, generate_srt

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(lang="en", lengths=[1000], depths=[0, 50], repeats=1)


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder for this test, and no per-process memo of loaded corpora."""
    monkeypatch.setenv("NEEDLEBENCH_CACHE", str(tmp_path / "cache"))
    haystack.load_tokenized.cache_clear()
    yield tmp_path / "cache"
    haystack.load_tokenized.cache_clear()


# -- bug 1: one digest algorithm ------------------------------------------------------------------


def test_content_digest_is_sha256_whatever_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("xxhash")
    fake.xxh3_64_hexdigest = lambda data: "0" * 16  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "xxhash", fake)
    assert content_digest(b"prompt") == hashlib.sha256(b"prompt").hexdigest()[:16]
    monkeypatch.setitem(sys.modules, "xxhash", None)  # not installed
    assert content_digest(b"prompt") == hashlib.sha256(b"prompt").hexdigest()[:16]


# -- bug 2: hash by value ------------------------------------------------------------------------


def test_stable_hash_canonicalises_numbers_and_sequences() -> None:
    assert stable_hash("depth", 50) == stable_hash("depth", 50.0)
    assert stable_hash(True) != stable_hash(1) and stable_hash(False) != stable_hash(0)
    assert stable_hash((1, 2.0)) == stable_hash([1, 2])
    assert stable_hash(0.5) != stable_hash(0) and canonical(0.1) == "0.1"
    assert stable_hash({"b": 1.0, "a": 2}) == stable_hash({"a": 2, "b": 1})
    assert rng("x", 25).random() == rng("x", 25.0).random()
    # strings hash as themselves and ints by their digits, as before: existing seeds stay put
    assert canonical("abc") == "abc" and canonical(12) == "12"


def _srt(depth: float) -> list:
    return list(generate_srt(SparseParams(lang="en", lengths=(1000,), depths=(depth,), repeats=1)))


def test_integral_float_depth_gives_the_same_prompt_and_gold() -> None:
    (a,), (b,) = _srt(50), _srt(50.0)
    assert (a.prompt, a.gold) == (b.prompt, b.gold)


def test_integral_float_depth_gives_identical_samples_and_ids() -> None:
    (a,), (b,) = _srt(50), _srt(50.0)
    assert a.id == b.id
    assert json.dumps(a.meta, sort_keys=True) == json.dumps(b.meta, sort_keys=True)


# -- bug 3: keys cover code and input data ---------------------------------------------------------


def _corpus_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    return path


def test_tokenized_cache_rebuilds_when_its_code_changes(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    haystack.load_tokenized("en")
    files = set((cache / "corpora").glob("*.npz"))
    assert len(files) == 1
    built: list[int] = []
    real = haystack._write_tokenized
    monkeypatch.setattr(haystack, "_write_tokenized", lambda *a: built.append(1) or real(*a))
    haystack.load_tokenized.cache_clear()
    haystack.load_tokenized("en")
    assert not built  # unchanged code and data: read back
    monkeypatch.setattr(haystack, "_cache_code_digest", lambda: "edited-reader")
    haystack.load_tokenized.cache_clear()
    haystack.load_tokenized("en")
    assert built == [1]
    assert len(set((cache / "corpora").glob("*.npz")) - files) == 1


def test_tokenized_cache_follows_corpus_content_not_size_and_time(cache: Path, tmp_path: Path) -> None:
    path = _corpus_file(tmp_path, "Alpha beta gamma. Delta epsilon.\n\nZeta eta theta.")
    first = haystack.load_tokenized("en", str(path)).corpus.documents
    st = path.stat()
    path.write_text("Omega beta gamma. Delta epsilon.\n\nZeta eta theta.", encoding="utf-8")  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the same time
    from needlebench.context import corpora

    corpora.corpus_digest.cache_clear()
    corpora.load_corpus.cache_clear()
    haystack.load_tokenized.cache_clear()
    second = haystack.load_tokenized("en", str(path)).corpus.documents
    assert first[0].startswith("Alpha") and second[0].startswith("Omega")


def test_dataset_cache_key_covers_code(monkeypatch: pytest.MonkeyPatch) -> None:
    params = SparseParams(lang="en", lengths=(1000,), depths=(50,), repeats=1)
    from needlebench.cache import arrow_rows as rows

    before = rows.cache_key("srt", params)
    monkeypatch.setattr(rows, "code_digest", lambda *m: "edited")
    assert rows.cache_key("srt", params) != before


# -- bug 4: corrupt files are rebuilt, writes are atomic ------------------------------------------------


def _only(folder: Path, pattern: str) -> Path:
    (path,) = folder.glob(pattern)
    return path


def test_truncated_npz_is_rebuilt_not_read(cache: Path) -> None:
    good = haystack.load_tokenized("en")
    path = _only(cache / "corpora", "*.npz")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    haystack.load_tokenized.cache_clear()
    again = haystack.load_tokenized("en")
    assert again.corpus.documents == good.corpus.documents
    assert path.read_bytes() == data


def test_corrupt_arrow_is_rebuilt_not_read(cache: Path) -> None:
    rows = load_rows("srt", **SMALL).to_list()
    path = _only(cache / "datasets", "*.arrow")
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)  # same size, garbled prompt text
    path.write_bytes(bytes(data))
    assert load_rows("srt", **SMALL).to_list() == rows
    path.write_bytes(bytes(data[:100]))  # truncated
    assert load_rows("srt", **SMALL).to_list() == rows
    path.with_name(path.name + ".sum").unlink()  # a file whose writer died before its checksum
    assert load_rows("srt", **SMALL).to_list() == rows


def test_atomic_write_keeps_the_old_file_and_no_temp_on_error(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with store.atomic_write(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("generator failed")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]
    with store.atomic_write(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


# -- bug 5: processes started together, one build ----------------------------------------------------------------

_CHILD = """
import json, os, sys, time
from pathlib import Path
from needlebench.cache import arrow_rows
from needlebench.opencompass import dataset
start, log = Path(sys.argv[1]), Path(sys.argv[2])
real = arrow_rows.write_rows
def counted(*args):
    with log.open("a") as fh:
        fh.write(f"{os.getpid()}\\n")
    return real(*args)
arrow_rows.write_rows = counted
(start.parent / f"ready-{os.getpid()}").touch()  # imported and patched: the parent starts all at once
while not start.exists():
    time.sleep(0.01)
rows = dataset.load_rows("srt", **json.loads(sys.argv[3])).to_list()
print(json.dumps(rows, sort_keys=True))
"""


def test_four_processes_started_together_build_one_dataset_once(tmp_path: Path) -> None:
    """Four processes asking for one dataset at the same instant (each imported and waiting on one start file):
    one builds it, three wait and read it. (Eight, as OpenCompass's workers may be, proved nothing more on two
    cores and took 64 s of CPU against 32.)"""
    env = {**os.environ, "NEEDLEBENCH_CACHE": str(tmp_path / "cache")}
    start, log = tmp_path / "go", tmp_path / "builds.log"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(start), str(log), json.dumps(SMALL)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    deadline = time.monotonic() + 300
    while len(list(tmp_path.glob("ready-*"))) < len(procs):  # every child imported, none started yet
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "a builder died before the start"
        time.sleep(0.05)
    start.touch()
    outputs = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
        outputs.append(out.strip().splitlines()[-1])
    assert len(set(outputs)) == 1 and json.loads(outputs[0])
    assert len(log.read_text().split()) == 1  # one process built, three waited and read
    folder = tmp_path / "cache" / "datasets"
    assert len(list(folder.glob("*.arrow"))) == 1 and len(list(folder.glob("*.arrow.sum"))) == 1
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temp files left
    assert store.verified(_only(folder, "*.arrow")) is not None
    assert json.loads(outputs[0]) == oc_dataset.Dataset.from_file(str(_only(folder, "*.arrow"))).to_list()


# -- one materialisation per run: the partitioner builds every dataset once, on all cores --------------
_UNGUARDED = """
# no `if __name__ == "__main__"` guard: worker processes must never re-run this script
import json, sys
from needlebench.cache.arrow_rows import materialize_many
from needlebench.opencompass.configs import needlebench_datasets
from needlebench.tasks import config_params
ds = needlebench_datasets(suite="4k", langs=["en", "zh"], lengths=[1000], depths=[0, 100], repeats=1)
paths = materialize_many([(d["task"], config_params(d)) for d in ds] * 2, workers=2)
print(json.dumps([str(p) for p in paths]))
"""


def test_materialize_many_builds_each_dataset_once_in_worker_processes(tmp_path: Path) -> None:
    script = tmp_path / "unguarded.py"
    script.write_text(_UNGUARDED)
    env = {**os.environ, "NEEDLEBENCH_CACHE": str(tmp_path / "cache")}
    r = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    paths = [Path(p) for p in json.loads(r.stdout.strip().splitlines()[-1])]
    assert len(paths) == 12 and paths[:6] == paths[6:]  # the same job twice is one file
    folder = tmp_path / "cache" / "datasets"
    assert sorted(folder.glob("*.arrow")) == sorted(set(paths))
    assert all(store.verified(p) is not None for p in paths)
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temp files left
    # what the workers built is the file a task of this process reads (same key, same name)
    rows = oc_dataset.load_rows("srt", **config_params(_srt_en()))
    assert len(rows) == 2 and Path(rows.cache_files[0]["filename"]).name in {p.name for p in paths}


def _srt_en() -> dict:
    from needlebench.opencompass.configs import needlebench_datasets

    (d,) = needlebench_datasets(suite="4k", tasks=["srt"], langs=["en"], lengths=[1000], depths=[0, 100], repeats=1)
    return d


def test_materialize_many_reports_a_bad_value_as_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from needlebench.cache.arrow_rows import materialize_many
    from needlebench.errors import ConfigError

    monkeypatch.setenv("NEEDLEBENCH_CACHE", str(tmp_path / "cache"))
    jobs = [("srt", {**config_params(_srt_en()), "lengths": (12,)}), ("mrt", {**config_params(_srt_en())})]
    with pytest.raises(ConfigError, match="lengths: 12 is too short"):
        materialize_many(jobs, workers=2)


def test_dataset_cache_key_covers_every_module_generation_imports() -> None:
    """An edit to any module a generator runs changes the cache key (and nothing else needs to)."""
    code = (
        "import json, sys\n"
        "from needlebench.tasks import all_tasks, make_params\n"
        "small = {'srt': dict(lang='en', lengths=[1000], depths=[50], repeats=1),\n"
        "         'mrt': dict(lang='en', lengths=[1000], depths=[50], repeats=1, num_needles=[2]),\n"
        "         'mrs': dict(lang='en', lengths=[1000], depths=[50], repeats=1, num_needles=[2]),\n"
        "         'atc': dict(lang='en', needle_counts=[2], repeats=1),\n"
        "         'atc_mc': dict(lang='en', steps=[2], repeats=1),\n"
        "         'needlechain': dict(k_values=[5], points=1)}\n"
        "for spec in all_tasks():\n"
        "    next(iter(spec.generate(make_params(spec.name, **small[spec.name]))))\n"
        "from needlebench.opencompass import dataset\n"
        "print(json.dumps(sorted(m.__file__ for n, m in sys.modules.items() if n.startswith('needlebench'))))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    package = Path(store.__file__).parent
    loaded = [Path(f).relative_to(package).as_posix() for f in json.loads(r.stdout.splitlines()[-1])]
    from needlebench.cache.arrow_rows import _ROW_SOURCES

    uncovered = [f for f in loaded if not any(fnmatch.fnmatch(f, pattern) for pattern in _ROW_SOURCES)]
    assert not uncovered, f"generation imports modules the dataset cache key does not cover: {uncovered}"


# -- the row writer: bytes as generated, a checksum of what was written ------------------------------


def test_arrow_rows_are_the_generated_rows_and_the_sidecar_checksum_is_the_files(cache: Path) -> None:
    """The writer stores each prompt's assembled bytes (never decoded and encoded again) and checksums
    them as they go out: the file's rows are the generated samples' rows, U+FFFD included where
    OpenCompass's exact token cut splits a Chinese character, and the sidecar's CRC is the file's."""
    from needlebench.cache.store import sample_to_row
    from needlebench.tasks import get_task, make_params

    params = dict(lang="zh", lengths=[1000, 2000], depths=[0, 37, 100], repeats=2)
    rows = load_rows("srt", **params).to_list()
    expected = [sample_to_row(s) for s in get_task("srt").generate(make_params("srt", **params))]
    assert rows == expected
    assert any("\ufffd" in r["prompt"] for r in rows) and any("\ufffd" not in r["prompt"] for r in rows)
    path = _only(cache / "datasets", "*.arrow")
    info = json.loads(path.with_name(path.name + ".sum").read_text())
    assert info["crc32"] == store.file_checksum(path) and info["size"] == path.stat().st_size
    # the same bytes under a new modification time: checked against the checksum, trusted, not rebuilt
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert store.verified(path) == info


def test_a_sample_given_as_utf8_reads_equals_and_pickles_as_one_given_as_text() -> None:
    """``Sample.from_utf8`` defers the decode; every way code reads a sample sees the same text."""
    import dataclasses
    import pickle

    from needlebench.sample import Sample

    text = "草堂 — haystack\ufffd and needle"
    eager = Sample("i", "srt", "zh", text, {"keywords": ["x"]}, {"length": 1000})
    lazy = Sample.from_utf8("i", "srt", "zh", text.encode("utf-8"), {"keywords": ["x"]}, meta={"length": 1000})
    assert pickle.loads(pickle.dumps(lazy)).prompt == text  # unpickled before any read, then decoded
    assert lazy == eager and repr(lazy) == repr(eager) and lazy.prompt == text
    assert dataclasses.replace(lazy, id="j").prompt == text and lazy.export_row("d") == eager.export_row("d")
    with pytest.raises(TypeError, match="prompt"):
        Sample("i", "srt", "zh")  # type: ignore[call-arg]  # the field stays required


def test_released_dataset_pages_leave_rss_and_the_rows_read_the_same() -> None:
    """After ``release_mapped`` the prompts a process read through one dataset are out of its RSS (file-backed
    pages) and read back the same; a second ``Dataset`` of the same file keeps its pages; ``releasing`` iterates
    the same rows; a dataset in memory has no mapping to release (its buffers are never advised); rows read
    column by column on demand hold the same values."""
    import psutil
    from datasets import Dataset

    from needlebench.cache.pages import OnDemandRow, dataset_mappings, release_mapped, releasing, rows_on_demand

    params = dict(lang="en", lengths=[8000], depths=[0, 50, 100], repeats=2)
    rows, other = load_rows("srt", **params), Dataset.from_file(load_rows("srt", **params).cache_files[0]["filename"])
    prompts = [row["prompt"] for row in rows]
    assert [row["prompt"] for row in other] == prompts
    (mapping,) = dataset_mappings(rows)
    assert dataset_mappings(other) and dataset_mappings(other) != [mapping]  # a mapping of its own
    mapped = psutil.Process().memory_info().shared
    assert release_mapped([mapping]) == mapping[1] - mapping[0]  # the whole mapping advised
    released = psutil.Process().memory_info().shared
    assert released < mapped  # the read pages left this process
    assert mapped - released < sum(len(p.encode()) for p in prompts) * 1.5  # the other dataset kept its pages
    assert [row["prompt"] for row in rows] == prompts
    assert list(releasing(rows)) == list(rows) and len(releasing(rows)) == len(rows)
    assert dataset_mappings(Dataset.from_dict({"a": ["x" * 100_000]})) == []
    # rows read column by column hold the values datasets' rows hold; an index mapping or a format reads as before
    on_demand = list(rows_on_demand(rows))
    assert all(isinstance(r, OnDemandRow) for r in on_demand) and [dict(r) for r in on_demand] == list(rows)
    assert "prompt" in on_demand[0] and "nope" not in on_demand[0] and on_demand[0].get("nope") is None
    assert on_demand[1].utf8("prompt") == prompts[1].encode("utf-8")
    picked = rows.select([2, 0])
    assert [type(r) for r in rows_on_demand(picked)] == [dict, dict] and list(rows_on_demand(picked)) == list(picked)
    assert all(type(r) is dict for r in rows_on_demand(rows.with_format("numpy")))


@pytest.mark.parametrize(
    "task,params",
    [
        ("srt", dict(lang="en", lengths=[1000, 2000], depths=[0, 100], repeats=1)),
        ("srt", dict(lang="en", lengths=[1000, 2000], depths=[0, 100], repeats=1, max_prompt_tokens=1500)),
        ("atc", dict(lang="en", needle_counts=[2, 4], repeats=1)),
        ("needlechain", dict(k_values=[5], points=1)),
    ],
    ids=["srt", "srt-shortened", "atc", "needlechain"],
)
def test_cached_rows_carry_their_token_counts_as_integer_columns(task: str, params: dict) -> None:
    """Planning and a model's limit read ``prompt_tokens`` and ``budget_tokens`` as columns, never from ``meta``:
    the columns hold what the metadata says (a dense prompt's budget is its own size)."""
    ds = load_rows(task, **params)
    assert (ds.features["prompt_tokens"].dtype, ds.features["budget_tokens"].dtype) == ("int64", "int64")
    metas = [json.loads(m) for m in ds["meta"]]
    assert ds["prompt_tokens"] == [m["prompt_tokens"] for m in metas]
    assert ds["budget_tokens"] == [m.get("budget_tokens", m["prompt_tokens"]) for m in metas]
    if params.get("max_prompt_tokens"):
        assert max(ds["budget_tokens"]) == 1500 and any("shortened_from" in m for m in metas)
