"""Generate a dataset once per config and reuse it from disk.

OpenCompass builds every dataset in the infer task and again in the eval
task. Both see the same samples because generation is deterministic; the
store also makes the second build a memory-mapped file read. The key
covers the task parameters, the dataset version and the identity of the
corpus and needle files, so an edited input never serves stale samples.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Iterator
from pathlib import Path

from .corpora import corpus_identity
from .needles import default_needle_file
from .sample import DATASET_VERSION, Sample
from .seeding import content_digest, stable_hash

__all__ = ["cache_dir", "cache_key", "ROW_COLUMNS", "sample_to_row", "rows"]

ROW_COLUMNS = ("id", "task", "lang", "prompt", "system", "answer", "meta")


def cache_dir() -> Path:
    root = os.environ.get("NEEDLEBENCH_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "needlebench"


def _file_identity(path: str) -> str:
    p = Path(path)
    try:
        st = p.stat()
    except OSError:
        return f"{path}:missing"
    return f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}"


@functools.lru_cache(maxsize=1)
def _code_identity() -> str:
    """Digest of the generator sources and committed data, so a code edit never serves stale rows."""
    package = Path(__file__).resolve().parent
    data = package.parent / "data"
    files = sorted(package.glob("*.py"))
    if data.is_dir():
        files += sorted(data.rglob("*.json*"))
    return content_digest(b"".join(f.read_bytes() for f in files))


def cache_key(task: str, params: object) -> str:
    fields = dataclasses.asdict(params)
    ident = {"task": task, "params": fields, "version": DATASET_VERSION, "code": _code_identity()}
    lang = fields.get("lang")
    if "corpus" in fields and lang:
        ident["corpus"] = corpus_identity(lang, fields["corpus"])
    if "needle_file" in fields and lang:
        ident["needles"] = _file_identity(fields["needle_file"] or str(default_needle_file(lang)))
    return stable_hash(json.dumps(ident, sort_keys=True, default=str), digest_size=12)


def sample_to_row(sample: Sample) -> dict[str, str]:
    return {
        "id": sample.id,
        "task": sample.task,
        "lang": sample.lang,
        "prompt": sample.prompt,
        "system": sample.system,
        "answer": json.dumps(sample.gold, ensure_ascii=False, sort_keys=True),
        "meta": json.dumps(sample.meta, ensure_ascii=False, sort_keys=True),
    }


def rows(samples: Iterator[Sample]) -> Iterator[dict[str, str]]:
    for s in samples:
        yield sample_to_row(s)
