"""Reference-protocol parity: our prompts against OpenCompass 0.5.4's own needlebench_v2 loaders.

OpenCompass's installed code builds each reference prompt from small stand-in
files in its formats (our corpora, needles and names written as
``PaulGrahamEssays.jsonl``, ``zh_finance.jsonl``, ``needles.jsonl``,
``names.json``). Everything but the haystack text and the invented content
(the needle's words, the people's names) must be identical: instructions,
question lines, answer formats, examples, delimiters and whitespace. The
document must hold as many tokens as OpenCompass gives it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from unittest import mock

import pytest

from needlebench.context.tokenizer import get_encoding
from needlebench.tasks import get_task, make_params
from needlebench.tasks.kinship import RELATIONS

ENC = get_encoding("cl100k_base")  # also places the offline BPE file where tiktoken looks for it
LANGUAGE = {"en": "English", "zh": "Chinese"}
CORPUS = {"en": "PaulGrahamEssays.jsonl", "zh": "zh_finance.jsonl"}
DOC = {"en": ("<Document>\n", "\n</Document>"), "zh": ("<文档>\n", "\n</文档>")}


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bench.standin import build_standin

    return build_standin(tmp_path_factory.mktemp("oc"))


def _needle_subset(folder: Path, lang: str, count: int, out: Path) -> Path:
    """A needles.jsonl holding only ``count`` needles of one language, so both sides ask the same ones."""
    rows = [json.loads(x) for x in (folder / "needles.jsonl").read_text(encoding="utf-8").splitlines()]
    mine = [r for r in rows if r["language"] == LANGUAGE[lang]][:count]
    out.mkdir(parents=True, exist_ok=True)
    for name in (CORPUS[lang], "names.json"):
        (out / name).write_bytes((folder / name).read_bytes())
    (out / "needles.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in mine), "utf-8")
    return out


def _split(prompt: str, lang: str) -> tuple[str, str, str]:
    open_, close = DOC[lang]
    head, rest = prompt.split(open_, 1)
    doc, tail = rest.rsplit(close, 1)
    return head + open_, doc, close + tail


def _ours(task: str, **kwargs: object) -> list:
    return list(get_task(task).generate(make_params(task, **kwargs)))


@pytest.mark.parametrize("position", ["end", "start"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_srt_matches_opencompass(standin: Path, tmp_path: Path, lang: str, position: str) -> None:
    from opencompass.datasets.needlebench_v2.origin import NeedleBenchOriginDataset

    folder = _needle_subset(standin, lang, 1, tmp_path / "srt")
    length, buffer = 4000, 500 if lang == "en" else 200
    ref = NeedleBenchOriginDataset.load(
        path=str(folder),
        length=length,
        depth=50,
        tokenizer_model="gpt-4",
        file_list=[CORPUS[lang]],
        num_repeats_per_file=1,
        length_buffer=buffer,
        language=LANGUAGE[lang],
        needle_file_name="needles.jsonl",
        quesiton_position=position.capitalize(),
    )[0]["prompt"]
    (ours,) = _ours(
        "srt",
        lang=lang,
        lengths=(length,),
        depths=(50,),
        repeats=1,
        buffer=buffer,
        needle_file=str(folder / "needles.jsonl"),
        question_position=position,
    )
    ref_head, ref_doc, ref_tail = _split(ref, lang)
    head, doc, tail = _split(ours.prompt, lang)
    assert (head, tail) == (ref_head, ref_tail)
    needle = f"\n{ours.gold['needle']}\n"
    assert needle in doc and needle in ref_doc
    # the document holds length - buffer tokens on both sides
    assert abs(len(ENC.encode_ordinary(doc)) - len(ENC.encode_ordinary(ref_doc))) <= 64


def _mask_questions(tail: str, needles: list[dict]) -> str:
    """Replace each needle's question and answer-format words by placeholders (they are invented content)."""
    for n in needles:
        rq = n["retrieval_question"]
        q = rq.split("?")[0] if "?" in rq else rq.split("？")[0]
        fmt = rq.split("'")[1].split(".")[0].split("。")[0]
        tail = tail.replace(fmt, "FORMAT").replace(q, "QUESTION")
    return tail


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_mrt_matches_opencompass(standin: Path, tmp_path: Path, lang: str) -> None:
    from opencompass.datasets.needlebench_v2.parallel import NeedleBenchParallelDataset

    folder = _needle_subset(standin, lang, 3, tmp_path / "mrt")
    needles = [json.loads(x) for x in (folder / "needles.jsonl").read_text(encoding="utf-8").splitlines()]
    depths, length, buffer = [10, 50, 90], 8000, 500 if lang == "en" else 200
    ref = NeedleBenchParallelDataset.load(
        path=str(folder),
        needle_file_name="needles.jsonl",
        length=length,
        depths=depths,
        tokenizer_model="gpt-4",
        file_list=[CORPUS[lang]],
        num_repeats_per_file=1,
        length_buffer=buffer,
        language=LANGUAGE[lang],
    )[0]["prompt"]
    (ours,) = _ours(
        "mrt",
        lang=lang,
        lengths=(length,),
        depths=tuple(depths),
        repeats=1,
        buffer=buffer,
        needle_file=str(folder / "needles.jsonl"),
    )
    ref_head, ref_doc, ref_tail = _split(ref, lang)
    head, doc, tail = _split(ours.prompt, lang)
    assert head == ref_head
    assert _mask_questions(tail, needles) == _mask_questions(ref_tail, needles)
    for n in needles:
        assert f"\n{n['needle']}\n" in doc and f"\n{n['needle']}\n" in ref_doc
    assert abs(len(ENC.encode_ordinary(doc)) - len(ENC.encode_ordinary(ref_doc))) <= 64


def _mask_names(text: str, names: list[str]) -> str:
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, "NAME")
    return text


@pytest.mark.parametrize("position", ["end", "start"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_mrs_matches_opencompass(standin: Path, lang: str, position: str) -> None:
    from opencompass.datasets.needlebench_v2 import multi

    length, buffer, count = 4000, 500 if lang == "en" else 200, 3
    with mock.patch.object(multi, "hf_hub_download", lambda repo_id, filename, repo_type: str(standin / filename)):
        ref_row = multi.NeedleBenchMultiDataset.load(
            path="unused",
            length=length,
            depth=20,
            tokenizer_model="gpt-4",
            file_list=[CORPUS[lang]],
            num_repeats_per_file=1,
            length_buffer=buffer,
            language=LANGUAGE[lang],
            needle_file_name="names.json",
            num_needles=count,
            diff=10,
            quesiton_position=position.capitalize(),
        )[0]
    (ours,) = _ours(
        "mrs",
        lang=lang,
        lengths=(length,),
        depths=(20,),
        repeats=1,
        buffer=buffer,
        num_needles=(count,),
        question_position=position,
    )
    ref_names = json.loads((standin / "names.json").read_text(encoding="utf-8"))[LANGUAGE[lang]].split(",")
    ref_head, _, ref_tail = _split(ref_row["prompt"], lang)
    head, doc, tail = _split(ours.prompt, lang)
    names = ours.gold["chain_names"] + ref_names
    assert _mask_names(head, names) == _mask_names(ref_head, names)
    assert _mask_names(tail, names) == _mask_names(ref_tail, names)
    assert ours.gold["answer"] == ours.gold["chain_names"][0]
    assert ours.meta["depths"] == [20.0, 30.0, 40.0]  # OpenCompass's diff=10 spacing, without its double count
    for statement in ours.meta["chain"]:
        assert f"{statement['elder']}" in doc


_QTYPES = ["eldest_ancestor", "nth_ancestor", "nth_descendant", "relationship_distance"]
_STORY = {
    "en": ("provided below:\n", "\n\nGiven the scrambled"),
    "zh": ("打乱的家族关系文本如下：\n", "\n\n在上面提供的"),
}


def _template_patterns(lang: str) -> list[re.Pattern[str]]:
    """OpenCompass's own sentence templates as regexes (any name, any of its terms)."""
    from opencompass.datasets.needlebench_v2 import atc

    templates = atc.relationship_templates_en if lang == "en" else atc.relationship_templates_zh_CN
    terms = atc.relationship_terms_en if lang == "en" else atc.relationship_terms_zh_CN
    term_alt = "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True))
    out = []
    for t in templates:
        pattern = re.escape(t).replace(r"\{A\}", "(.+?)").replace(r"\{B\}", "(.+?)")
        out.append(re.compile(pattern.replace(r"\{relationship\}", f"(?:{term_alt})")))
    return out


@pytest.mark.parametrize("qtype", _QTYPES)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_atc_matches_opencompass(standin: Path, lang: str, qtype: str) -> None:
    from opencompass.datasets.needlebench_v2.atc import NeedleBenchATCDataset, QuestionType

    n = 8
    ref = NeedleBenchATCDataset.load(
        path=str(standin),
        file_name="names.json",
        num_needles=n,
        language=LANGUAGE[lang],
        repeats=1,
        question_types=[QuestionType[qtype.upper()]],
    )[0]["prompt"]
    (ours,) = _ours("atc", lang=lang, needle_counts=(n,), question_types=(qtype,), repeats=1)
    start, end = _STORY[lang]

    def parts(prompt: str) -> tuple[str, str, str]:
        head, rest = prompt.split(start, 1)
        story, tail = rest.split(end, 1)
        return head, story, tail

    ref_head, _, ref_tail = parts(ref)
    head, story, tail = parts(ours.prompt)
    ref_names = json.loads((standin / "names.json").read_text(encoding="utf-8"))[LANGUAGE[lang]].split(",")
    names = ours.gold["chain_names"] + ref_names

    def mask(text: str) -> str:
        return re.sub(r"\d+", "N", _mask_names(text, names))

    assert mask(head) == mask(ref_head)
    assert mask(tail) == mask(ref_tail)
    # the story: OpenCompass's statements, joined with nothing, every link exactly once
    assert story == "".join(_statements(ours)) and len(_statements(ours)) == n
    terms = {r.term for r in RELATIONS[lang]}
    assert all(link["term"] in terms for link in ours.meta["chain"])


def _statements(sample: object) -> list[str]:
    """Our chain's statements in presented order, rebuilt from the prompt story (one per link)."""
    lang = sample.lang  # type: ignore[attr-defined]
    start, end = _STORY[lang]
    story = sample.prompt.split(start, 1)[1].split(end, 1)[0]  # type: ignore[attr-defined]
    names = sample.gold["chain_names"]  # type: ignore[attr-defined]
    out, rest = [], story
    while rest:
        cut = _first_end(rest, names, lang)
        out.append(rest[:cut])
        rest = rest[cut:]
    return out


def _first_end(text: str, names: list[str], lang: str) -> int:
    """Where the first statement of ``text`` ends: its full stop (names hold none)."""
    return text.index("。" if lang == "zh" else ".") + 1


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_atc_statements_use_opencompass_templates(lang: str) -> None:
    patterns = _template_patterns(lang)
    samples = _ours("atc", lang=lang, needle_counts=(64,), question_types=("eldest_ancestor",), repeats=2)
    forms_seen: set[int] = set()
    for s in samples:
        for statement in _statements(s):
            hits = [i for i, p in enumerate(patterns) if p.fullmatch(statement)]
            assert hits, statement
            forms_seen.update(hits)
    assert forms_seen == set(range(len(patterns)))  # every template, the "friend" form included
