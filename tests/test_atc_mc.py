"""The 2024 multiple-choice ATC: parity with OpenCompass's v1 ATC, circular scoring, determinism, hostile outputs."""

from __future__ import annotations

import ast
import inspect
import json
import random
import re
import warnings

import pytest
from conftest import assert_linear

from needlebench.record import GradedSample
from needlebench.scoring import ScoreOptions
from needlebench.tasks.atc import choice as atc_mc
from needlebench.tasks.atc import option_letter
from needlebench.tasks.atc.choice import (
    V1_TEMPLATES,
    V1_TERMS,
    AtcMcParams,
    generate_atc_mc,
    grade_atc_mc,
    oc_template_rounds,
    render_question,
)
from needlebench.tasks.atc.choice_results import atc_mc_table, circular_scores
from needlebench.tasks.atc.option_letter import first_option
from needlebench.tasks.kinship import load_name_pool

oc_choice = pytest.importorskip("opencompass.datasets.needlebench.atc_choice")
oc_post = pytest.importorskip("opencompass.utils.text_postprocessors")

OC_LANG = {"en": "English", "zh": "Chinese"}
OC_SHOTS = {
    ("zh", "direct"): "single_choice_cn",
    ("en", "direct"): "single_choice_en",
    ("zh", "reasoning"): "single_choice_cn_reasoning",
    ("en", "reasoning"): "single_choice_en_reasoning",
}
STEPS = (2, 3, 4, 5, 9)
OPTS = ScoreOptions()


def _stand_in_names(lang: str, count: int = 60) -> list[str]:
    """Names for OpenCompass's names.json, drawn from our pool (deterministically)."""
    pool = load_name_pool(lang)
    r = random.Random(7)
    names: list[str] = []
    while len(names) < count:
        if lang == "zh":
            name = r.choice(pool.last) + r.choice(pool.first) + r.choice(pool.first)
        else:
            name = f"{r.choice(pool.first)} {r.choice(pool.last)}"
        if name not in names:
            names.append(name)
    return names


@pytest.fixture(scope="module")
def oc_rows(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], list[dict]]:
    """OpenCompass's own v1 loader on a stand-in names.json (only the path is ours)."""
    folder = tmp_path_factory.mktemp("oc_names")
    names = {OC_LANG[lang]: ",".join(_stand_in_names(lang)) for lang in OC_LANG}
    (folder / "names.json").write_text(json.dumps(names, ensure_ascii=False), encoding="utf-8")
    state = random.getstate()  # the loader seeds the global RNG; leave it as we found it
    try:
        rows = {}
        for lang in OC_LANG:
            for steps in STEPS:
                ds = oc_choice.NeedleBenchATCDataset.load(
                    path=str(folder), file_name="names.json", num_needles=steps, language=OC_LANG[lang], repeats=1
                )
                rows[(lang, steps)] = [dict(row) for row in ds]
    finally:
        random.setstate(state)
    return rows


@pytest.fixture(scope="module")
def oc_config():
    from opencompass.configs.datasets.needlebench.atc import atc_choice_20

    return atc_choice_20


def _names_regex(names: list[str]) -> str:
    return "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))


def _parse_story(lang: str, story: str, names: list[str]) -> list[tuple[str, str, str]]:
    """Split a story into (statement, elder, younger), failing unless every character is a v1 statement."""
    who = _names_regex(names)
    terms = "|".join(re.escape(t) for t in sorted(V1_TERMS[lang], key=len, reverse=True))
    patterns = []
    for template in V1_TEMPLATES[lang]:
        pat = re.escape(template).replace(re.escape("{relationship}"), f"(?:{terms})")
        # The first {A} / {B} captures, later ones must repeat it.
        for field in ("A", "B"):
            token = re.escape("{" + field + "}")
            head, sep, tail = pat.partition(token)
            pat = head + f"(?P<{field}>{who})" + tail.replace(token, f"(?P={field})") if sep else pat
        patterns.append(re.compile(pat))
    out, pos = [], 0
    while pos < len(story):
        for pat in patterns:
            m = pat.match(story, pos)
            if m:
                out.append((m.group(0), m.group("A"), m.group("B")))
                pos = m.end()
                break
        else:
            raise AssertionError(f"not a v1 statement at {pos}: {story[pos : pos + 60]!r}")
    return out


def _split_question(lang: str, question: str) -> tuple[str, str, list[str]]:
    """(story, question line, options) of one rendered question."""
    story, sep, rest = question.partition(" \n")
    assert sep, question
    line, *opts = rest.split("\n")
    assert opts[-1] == "" and len(opts) == 5, rest
    return story, line, [o[3:] for o in opts[:4]]


def _mask(text: str, names: list[str]) -> str:
    return re.sub(_names_regex(names), "<NAME>", text)


# ---------------------------------------------------------------------------------------------
# Parity with OpenCompass
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("steps", STEPS)
def test_prompt_parity_with_opencompass(oc_rows, oc_config, lang: str, steps: int) -> None:
    from opencompass.openicl.icl_prompt_template import PromptTemplate

    theirs = oc_rows[(lang, steps)]
    ours = list(generate_atc_mc(AtcMcParams(lang, steps=(steps,), repeats=1, style="direct")))
    assert len(ours) == len(theirs) == 4
    oc_names = _stand_in_names(lang)
    our_names = list(ours[0].meta["chain"]) + list(ours[0].gold["options"])

    for rotation, (o, t) in enumerate(zip(ours, theirs)):
        # Same rotation, same gold letter and pattern as OpenCompass's circular answer field.
        _, letter, pattern = t["answer"].split("--")
        assert (o.gold["answer"], o.meta["circular_pattern"], o.meta["rotation"]) == (letter, pattern, rotation)
        assert o.gold["options"][ord(letter) - 65] == o.gold["answer_text"] == o.meta["chain"][0]

        # OpenCompass's question decomposes into v1 statements (our templates) + question line + options,
        # and our renderer rebuilds it byte for byte from those parts.
        t_story, t_line, t_opts = _split_question(lang, t["question"])
        t_links = _parse_story(lang, t_story, oc_names)
        assert len(t_links) == steps - 1
        last = re.search(r"'(.+)'", t_line).group(1)
        assert render_question(lang, [s for s, _, _ in t_links], last, t_opts) == t["question"]
        assert t_opts == t["options"]

        # Ours: the same structure; a chain eldest -> last person; the same option layout.
        o_question = o.prompt.split(": ", 1)[1]
        o_story, o_line, o_opts = _split_question(lang, o_question)
        o_links = _parse_story(lang, o_story, our_names)
        assert len(o_links) == steps - 1
        assert {(a, b) for _, a, b in o_links} == set(zip(o.meta["chain"], o.meta["chain"][1:]))
        assert o_opts == o.gold["options"]
        # Options as OpenCompass builds them: first four people from the eldest, padded with outsiders.
        chain = o.meta["chain"]
        base = [o.gold["options"][(i - rotation) % 4] for i in range(4)]
        assert base[: min(4, steps)] == chain[:4] and not set(base[steps:]) & set(chain)
        t_base = [t["options"][(i - rotation) % 4] for i in range(4)]
        t_chain = _chain_from_links(t_links)
        assert t_base[: min(4, steps)] == t_chain[:4] and not set(t_base[steps:]) & set(t_chain)

        # Everything but the names and the random statement choices is identical.
        assert _mask(o_line, our_names) == _mask(t_line, oc_names)
        assert [_mask(x, our_names) for x in o_opts] == [_mask(x, oc_names) for x in t_opts]
        o_masked = _mask(o_question.replace(o_story, "<STORY>"), our_names)
        t_masked = _mask(t["question"].replace(t_story, "<STORY>"), oc_names)
        assert o_masked == t_masked

        # The whole dialogue as OpenCompass renders it: their config's rounds vs ours.
        key = OC_SHOTS[(lang, "direct")]
        t_dialog = list(
            PromptTemplate(template=dict(round=oc_config.few_shot_prompts["single_choice_prompts"][key])).generate_item(
                {"question": t["question"]}
            )
        )
        o_dialog = list(
            PromptTemplate(template=dict(round=oc_template_rounds(lang, "direct"))).generate_item({"prompt": o.prompt})
        )
        assert len(o_dialog) == len(t_dialog) == 11
        assert o_dialog[:-2] == t_dialog[:-2]  # the four worked examples, verbatim
        assert o_dialog[-2]["role"] == t_dialog[-2]["role"] == "HUMAN"
        assert o_dialog[-2]["prompt"] == o.prompt
        t_final = _mask(t_dialog[-2]["prompt"].replace(t_story, "<STORY>"), oc_names)
        assert _mask(o.prompt.replace(o_story, "<STORY>"), our_names) == t_final


def _chain_from_links(links: list[tuple[str, str, str]]) -> list[str]:
    """Eldest-first chain from (statement, elder, younger) links in any order."""
    parent = {b: a for _, a, b in links}
    youngest = (set(parent) - set(parent.values())).pop()
    chain = [youngest]
    while chain[-1] in parent:
        chain.append(parent[chain[-1]])
    return chain[::-1]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("style", ["direct", "reasoning"])
def test_few_shot_rounds_are_opencompass_verbatim(oc_config, lang: str, style: str) -> None:
    theirs = oc_config.few_shot_prompts["single_choice_prompts"][OC_SHOTS[(lang, style)]]
    assert atc_mc.few_shot_rounds(lang, style) == [dict(r) for r in theirs[:-1]]
    assert theirs[-1]["prompt"] == atc_mc._FINAL_TURN[lang]
    assert atc_mc.few_shot_rounds(lang, style, shots=1) == [dict(r) for r in theirs[-3:-1]]


def test_config_defaults_match_opencompass_v1(oc_config) -> None:
    assert AtcMcParams("en").steps == tuple(oc_config.needle_num_list)
    assert AtcMcParams("en").repeats == oc_config.repeats
    assert AtcMcParams("en").shots == oc_config.few_shot_samples


def _oc_patterns() -> list[str]:
    """OpenCompass's first_option_postprocess pattern list, read from its source."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # their non-raw "\\s" strings
        tree = ast.parse(inspect.getsource(oc_post.first_option_postprocess))
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("patterns", "cushion_patterns"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    code = compile(ast.Expression(node.value), "<oc>", "eval")
                found[name] = eval(code, {"options": "ABCD"})
    return found["patterns"] + found["cushion_patterns"]


def test_option_patterns_are_opencompass_verbatim() -> None:
    assert list(option_letter._OPTION_PATTERNS) == _oc_patterns()


_SAMPLES = [
    "Answer: A",
    "回答: D",
    "A",
    " B. ",
    "Answer: Based on the provided information, we can construct the following family relationship chain："
    "\n\n- x\n\nTherefore, the eldest relative is Y. The answer is: C",
    "回答: 根据提供的信息，我们可以构建以下家族关系链：\n\n- x\n\n因此，最年长的亲人是Y。所以答案是：C",
    "The correct answer is \\boxed{D}.",
    "The correct answer is option (B)",
    "答案是 BAD。",
    "答案为 DCBA",
    "answer: b then C",
    "1. xyz A",
    "选项 C 正确",
    "C 是正确答案",
    "I think D is right",
    "None of them.",
    "",
    "**The answer is: (C)**",
    "所以 B。",
    "the answer to the question is D",
    "显然C。",
]


def test_first_option_matches_opencompass_on_examples() -> None:
    for text in _SAMPLES:
        assert first_option(text) == oc_post.first_option_postprocess(text, "ABCD"), text


def test_first_option_matches_opencompass_on_random_text() -> None:
    tokens = [
        "答案", "是", "为", "应该", "选", "选项", "项", " ", "\n", "。", "，", ":", "：", ".", "A", "B", "C", "D",
        "a", "b", "x", "1", "(", ")", "*", "$", "The answer is", "the correct answer is", "boxed{", "}",
        "所以", "因此", "故", "即", "显然", "正确", "错误", "对", "只有", "Answer", "option",
    ]  # fmt: skip
    r = random.Random(2024)
    for _ in range(3000):
        text = "".join(r.choice(tokens) for _ in range(r.randint(0, 14)))
        assert first_option(text) == oc_post.first_option_postprocess(text, "ABCD"), repr(text)


@pytest.mark.parametrize(
    "tokens",
    [
        ["答案是", "答案为", "答案应该是", " ", "\n", "。", "A", "B", "x", "答案", "应该是"],
        [
            "The correct answer is",
            "the correct answer option is",
            "boxed{",
            "}",
            "A",
            " ",
            ":",
            "The correct option is",
        ],
        [" ", "A", "B", "1", ".", "。", "$", ":", "\n", "x"],
    ],
)
def test_each_pattern_finder_equals_python_re(tokens: list[str]) -> None:
    """Every linear-time finder returns what ``re.search`` of OpenCompass's pattern returns."""
    r = random.Random(len(tokens))
    for _ in range(1500):
        text = "".join(r.choice(tokens) for _ in range(r.randint(0, 25))).strip()
        for pattern, find in zip(option_letter._OPTION_PATTERNS, option_letter._FINDERS):
            m = re.search(pattern, text, re.DOTALL)
            want = None if m is None else (m.group(1) or m.group(0))
            if pattern.startswith("(\\s|^)") and not (want and any(x in want for x in "ABCD")):
                want = None  # a match whose text holds no option is as good as none
            assert find(text) == want, (pattern, text)


# ---------------------------------------------------------------------------------------------
# Grading
# ---------------------------------------------------------------------------------------------


def test_grade_letters() -> None:
    gold = {"answer": "C", "options": ["w", "x", "y", "z"], "answer_text": "y"}
    assert grade_atc_mc("Answer: C", gold, OPTS).correct
    wrong = grade_atc_mc("Answer: D", gold, OPTS)
    assert (wrong.correct, wrong.format_failure, wrong.error, wrong.extras["chosen"]) == (
        False,
        False,
        "wrong_option",
        "z",
    )
    none = grade_atc_mc("I do not know.", gold, OPTS)
    assert (none.correct, none.format_failure, none.error) == (False, True, "no_option")
    assert grade_atc_mc("<think>maybe A</think>Answer: C", gold, OPTS).correct


@pytest.mark.parametrize(
    "hostile",
    [
        "答案是" * 350_000,
        "The correct answer is " * 48_000,
        "答案为 x" * 210_000,
        "x" * 1_000_000,
        " \n" * 500_000,
        "answer: " * 131_072,
        "1." * 500_000,
    ],
)
def test_hostile_megabyte_grades_fast_as_format_failure(hostile: str) -> None:
    assert len(hostile) >= 1_000_000
    gold = {"answer": "A", "options": ["w", "x", "y", "z"], "answer_text": "w"}
    score = grade_atc_mc(hostile, gold, OPTS)
    found = first_option(hostile)  # the extractor alone, on the whole megabyte
    assert (score.correct, score.format_failure, score.error, found) == (False, True, "no_option", "")
    assert_linear(lambda t: grade_atc_mc(t, gold, OPTS), hostile[: len(hostile) // 8], hostile)
    assert_linear(first_option, hostile[: len(hostile) // 8], hostile)


def test_first_option_is_linear_on_letters() -> None:
    """Inputs that reach deep into the pattern list stay linear (OpenCompass's regexes are quadratic on some)."""
    for make, n in ((lambda k: "答案x" * k + "A", 333_333), (lambda k: "The correct answer is A" * k, 43_000)):
        assert first_option(make(n)) == "A"  # the letter, not merely "" (no option found) or another one
        assert_linear(first_option, make(n // 8), make(n))
    assert first_option("x" * 1_000_000 + "B") == "B"
    assert_linear(first_option, "x" * 125_000 + "B", "x" * 1_000_000 + "B")


# ---------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------


def test_determinism_and_groups() -> None:
    p = AtcMcParams("en", steps=(2, 6), repeats=2, style="both")
    a, b = list(generate_atc_mc(p)), list(generate_atc_mc(p))
    assert [(s.id, s.prompt, s.gold) for s in a] == [(s.id, s.prompt, s.gold) for s in b]
    assert len(a) == 2 * 2 * 2 * 4 and len({s.id for s in a}) == len(a)
    groups: dict[str, list] = {}
    for s in a:
        groups.setdefault(s.meta["circular_group"], []).append(s)
        assert (s.meta["protocol"], s.meta["profile"], s.task) == ("reference", "v1", "atc_mc")
        assert s.meta["prompt_tokens"] > 0 and s.meta["version"]
    assert len(groups) == 2 * 2 * 2
    for members in groups.values():
        assert [m.meta["rotation"] for m in members] == [0, 1, 2, 3]
        assert [m.gold["answer"] for m in members] == ["A", "D", "C", "B"]
        assert len({m.gold["answer_text"] for m in members}) == 1
    # Both styles ask the same questions; OpenCompass's draw (reference) depends on the question's index
    # alone, as its atc_choice.py seeds it; under the seeded draw another seed asks others.
    direct = [s.prompt for s in a if s.meta["style"] == "direct"]
    assert direct == [s.prompt for s in a if s.meta["style"] == "reasoning"]
    same = list(generate_atc_mc(AtcMcParams("en", steps=(2, 6), repeats=2, style="direct", seed=1)))
    assert [s.prompt for s in same] == direct
    seeded = [AtcMcParams("en", steps=(2, 6), repeats=2, style="direct", seed=k, chain_draw="seeded") for k in (0, 1)]
    zero, one = ({s.prompt for s in generate_atc_mc(q)} for q in seeded)
    assert zero.isdisjoint(one) and zero.isdisjoint(direct)


def test_registered_and_params() -> None:
    from needlebench.errors import ConfigError
    from needlebench.tasks import get_task, make_params

    assert get_task("atc_mc").generate is generate_atc_mc
    p = make_params("atc_mc", lang="zh", steps=[2, 3], style="reasoning")
    assert p.steps == (2, 3) and p.styles == ("reasoning",)
    for bad in (dict(lang="fr"), dict(lang="en", steps=(1,)), dict(lang="en", style="cot"), dict(lang="en", shots=5)):
        with pytest.raises(ConfigError):
            list(generate_atc_mc(AtcMcParams(**bad)))


def test_chat_messages_render_the_dialogue() -> None:
    s = next(generate_atc_mc(AtcMcParams("zh", steps=(3,), repeats=1, style="reasoning")))
    msgs = atc_mc.chat_messages(s)
    assert [m["role"] for m in msgs] == ["user", "assistant"] * 4 + ["user"]
    assert msgs[-1]["content"] == s.prompt and s.prompt.startswith("问题: ")


# ---------------------------------------------------------------------------------------------
# Circular scoring
# ---------------------------------------------------------------------------------------------


def _record(model: str, lang: str, correct: bool, id: str, **fields: object) -> GradedSample:
    return GradedSample(id, "atc_mc", lang, fields, 100.0 * correct, correct, model=model)


def _records(
    group: str, step: int, right: list[bool], model: str = "m", rotations: list[int] | None = None
) -> list[GradedSample]:
    rotations = rotations if rotations is not None else list(range(len(right)))
    return [
        _record(model, "en", c, f"{group}-{i}", style="direct", circular_group=group, num_needles=step, rotation=r)
        for i, (c, r) in enumerate(zip(right, rotations))
    ]


def test_circular_scores_by_hand() -> None:
    records = (
        _records("q1", 2, [True] * 4)
        + _records("q2", 2, [True, True, False, True])  # 3 of 4 rotations: wrong
        + _records("q3", 3, [True] * 4)
        + _records("q4", 3, [True] * 3)  # a rotation missing: wrong, and reported
        + _records("q5", 3, [True] * 4)
        + _records("q6", 3, [True] * 4, rotations=[0, 1, 1, 2])  # duplicate instead of rotation 3
    )
    scores = circular_scores(records)
    s = scores[("m", "en", "direct")]
    assert s["per_step"] == {2: 50.0, 3: 50.0}
    assert s["questions"] == {2: 2, 3: 4}
    assert s["weighted"] == pytest.approx((50 * 2 + 50 * 3) / 5)
    assert s["incomplete"] == ["q4", "q6"] and s["complete"] is False

    records = _records("q1", 2, [True] * 4) + _records("q2", 2, [True, True, False, True])
    records += _records("q3", 3, [True] * 4) + _records("q5", 3, [True] * 4) + _records("q7", 3, [False] * 4)
    records += _records("z1", 2, [True] * 4, model="other")
    s = circular_scores(records)[("m", "en", "direct")]
    p3 = 200 / 3
    assert s["per_step"] == pytest.approx({2: 50.0, 3: p3})
    assert s["weighted"] == pytest.approx((50 * 2 + p3 * 3) / 5) == pytest.approx(60.0)
    assert s["complete"] is True

    table = atc_mc_table(records, ["m", "other"])
    assert list(table.columns) == ["model", "lang", "style", 2, 3, "weighted", "complete"]
    assert table["model"].tolist() == ["m", "other"]
    assert table.loc[0, "weighted"] == 60.0 and bool(table.loc[0, "complete"])
    assert table.loc[1, 2] == 100.0 and table.loc[1, "weighted"] == 100.0


def test_circular_scores_without_rotation_field() -> None:
    base = [_record("m", "zh", True, f"g-{i}", circular_group="g", num_needles=4) for i in range(4)]
    assert circular_scores(base)[("m", "zh", "")]["per_step"] == {4: 100.0}
    short = circular_scores(base[:3])[("m", "zh", "")]
    assert short["per_step"] == {4: 0.0} and short["incomplete"] == ["g"]


def test_end_to_end_perfect_model_scores_100() -> None:
    samples = list(generate_atc_mc(AtcMcParams("en", steps=(2, 5), repeats=2, style="direct")))
    records = []
    for s in samples:
        score = grade_atc_mc(f"Answer: {s.gold['answer']}", s.gold, OPTS)
        records.append(_record("oracle", s.lang, score.correct, s.id, **s.meta))
    assert circular_scores(records)[("oracle", "en", "direct")]["weighted"] == 100.0
    # Always answering "A" is right once per question, never under all rotations.
    records = [_record("oracle", s.lang, s.gold["answer"] == "A", s.id, **s.meta) for s in samples]
    assert circular_scores(records)[("oracle", "en", "direct")]["weighted"] == 0.0


def test_stand_in_names_file_format() -> None:
    """Guard: the stand-in file is in OpenCompass's names.json format (comma-joined per language)."""
    names = _stand_in_names("en", 5)
    assert all("," not in n for n in names) and len(set(names)) == 5
