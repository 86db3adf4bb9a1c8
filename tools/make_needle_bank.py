"""Write the project's fictional needle bank (needlebench/data/needles/needles_{en,zh}.jsonl, package data).

Every fact is invented from made-up words, so no model can answer from
memory and no keyword occurs in the haystack corpora. Run once; the output
is committed. Deterministic: the same script always writes the same bytes.

    python tools/make_needle_bank.py
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "needlebench" / "data" / "needles"
PER_TEMPLATE = 10

EN_TEMPLATES = [
    (
        "The hidden treasure of {place} Island is {answer}.",
        "What is the hidden treasure of {place} Island?",
        "The hidden treasure of {place} Island is ______.",
    ),
    (
        "The password to the vault beneath {place} Tower is {answer}.",
        "What is the password to the vault beneath {place} Tower?",
        "The password to the vault beneath {place} Tower is ______.",
    ),
    (
        "The favourite dish of the wizard {person} is {answer}.",
        "What is the favourite dish of the wizard {person}?",
        "The favourite dish of the wizard {person} is ______.",
    ),
    (
        "The first ship to reach the harbour of {place} was named {answer}.",
        "What was the first ship to reach the harbour of {place} named?",
        "The first ship to reach the harbour of {place} was named ______.",
    ),
    (
        "The rare flower that grows only in the {place} Valley is called {answer}.",
        "What is the rare flower that grows only in the {place} Valley called?",
        "The rare flower that grows only in the {place} Valley is called ______.",
    ),
    (
        "The lucky charm carried by the explorer {person} is {answer}.",
        "What is the lucky charm carried by the explorer {person}?",
        "The lucky charm carried by the explorer {person} is ______.",
    ),
    (
        "The ancient bell of {place} Abbey was cast from {answer}.",
        "What was the ancient bell of {place} Abbey cast from?",
        "The ancient bell of {place} Abbey was cast from ______.",
    ),
    (
        "The secret ingredient in the famous soup of {place} is {answer}.",
        "What is the secret ingredient in the famous soup of {place}?",
        "The secret ingredient in the famous soup of {place} is ______.",
    ),
    (
        "The pet dragon of Queen {person} is named {answer}.",
        "What is the pet dragon of Queen {person} named?",
        "The pet dragon of Queen {person} is named ______.",
    ),
    (
        "The lost crown of {place} was finally found inside {answer}.",
        "Where was the lost crown of {place} finally found?",
        "The lost crown of {place} was finally found inside ______.",
    ),
    (
        "The official instrument of the {place} Guild is {answer}.",
        "What is the official instrument of the {place} Guild?",
        "The official instrument of the {place} Guild is ______.",
    ),
    (
        "The map to the sunken city of {place} is hidden in {answer}.",
        "Where is the map to the sunken city of {place} hidden?",
        "The map to the sunken city of {place} is hidden in ______.",
    ),
]

EN_NOUNS = [
    "compass",
    "lantern",
    "teapot",
    "violin",
    "chalice",
    "mirror",
    "feather",
    "hourglass",
    "anchor",
    "kettle",
    "amulet",
    "harp",
    "spyglass",
    "drum",
    "locket",
    "quill",
    "sundial",
    "flute",
    "goblet",
    "music box",
]

ZH_TEMPLATES = [
    ("{place}岛上隐藏的宝藏是{answer}。", "{place}岛上隐藏的宝藏是什么？", "{place}岛上隐藏的宝藏是______。"),
    ("{place}塔地下金库的密码是{answer}。", "{place}塔地下金库的密码是什么？", "{place}塔地下金库的密码是______。"),
    ("巫师{person}最喜欢的菜是{answer}。", "巫师{person}最喜欢的菜是什么？", "巫师{person}最喜欢的菜是______。"),
    (
        "第一艘抵达{place}港的船名叫{answer}。",
        "第一艘抵达{place}港的船叫什么名字？",
        "第一艘抵达{place}港的船名叫______。",
    ),
    (
        "只生长在{place}谷的珍稀花卉叫作{answer}。",
        "只生长在{place}谷的珍稀花卉叫作什么？",
        "只生长在{place}谷的珍稀花卉叫作______。",
    ),
    (
        "探险者{person}随身携带的护身符是{answer}。",
        "探险者{person}随身携带的护身符是什么？",
        "探险者{person}随身携带的护身符是______。",
    ),
    (
        "{place}修道院的古钟是用{answer}铸成的。",
        "{place}修道院的古钟是用什么铸成的？",
        "{place}修道院的古钟是用______铸成的。",
    ),
    ("{place}名汤的秘方配料是{answer}。", "{place}名汤的秘方配料是什么？", "{place}名汤的秘方配料是______。"),
    ("女王{person}的宠物龙名叫{answer}。", "女王{person}的宠物龙叫什么名字？", "女王{person}的宠物龙名叫______。"),
    (
        "{place}失落的王冠最终在{answer}里被找到。",
        "{place}失落的王冠最终在哪里被找到？",
        "{place}失落的王冠最终在______里被找到。",
    ),
    ("{place}行会的官方乐器是{answer}。", "{place}行会的官方乐器是什么？", "{place}行会的官方乐器是______。"),
    (
        "通往沉没之城{place}的地图藏在{answer}中。",
        "通往沉没之城{place}的地图藏在哪里？",
        "通往沉没之城{place}的地图藏在______中。",
    ),
]

ZH_PLACE_CHARS = "澜砾翡潇岚琮珀溟岱汐璇霁槿瑶曦珂濯琨翊璟"
ZH_NAME_CHARS = "缇萝琪纨绮蔻瑛璎婵菁"
ZH_ANSWER_HEADS = ["紫晶", "琉璃", "青铜", "赤玉", "银杏木", "玄铁", "琥珀", "白瓷", "翠羽", "金丝"]
ZH_ANSWER_TAILS = ["罗盘", "灯笼", "茶壶", "竖琴", "圣杯", "铜镜", "沙漏", "铃铛", "锦盒", "短笛", "怀表", "风铃"]


def invented_word(rnd: random.Random, syllables: int) -> str:
    onsets = [
        "b",
        "d",
        "f",
        "g",
        "k",
        "l",
        "m",
        "n",
        "p",
        "r",
        "s",
        "t",
        "v",
        "z",
        "br",
        "dr",
        "gl",
        "kr",
        "st",
        "th",
        "qu",
        "sk",
    ]
    vowels = ["a", "e", "i", "o", "u", "ae", "ou", "ai", "y"]
    codas = ["", "", "n", "r", "l", "x", "th", "sk", "m"]
    word = "".join(rnd.choice(onsets) + rnd.choice(vowels) + rnd.choice(codas) for _ in range(syllables))
    return word.capitalize()


def build(
    lang: str,
    templates: list,
    makers: dict[str, Callable[[], str]],
    answer: Callable[[str], str],
    key: Callable[[str], str],
) -> list[dict]:
    """PER_TEMPLATE needles per template; every place, person and answer is used once."""
    rows: list[dict] = []
    used: set[str] = set()

    def fresh(make: Callable[[], str]) -> str:
        while True:
            value = make()
            if key(value) not in used:
                used.add(key(value))
                return value

    for t_index, (fact, question, fmt) in enumerate(templates):
        for _ in range(PER_TEMPLATE):
            place, person, core = fresh(makers["place"]), fresh(makers["person"]), fresh(makers["core"])
            slots = {"place": place, "person": person, "answer": answer(core)}
            rows.append(
                {
                    "id": f"{lang}-{len(rows) + 1:03d}",
                    "lang": lang,
                    "needle": fact.format(**slots),
                    "question": question.format(**slots),
                    "answer_format": fmt.format(**slots),
                    "keywords": [core],
                    "template": t_index,
                }
            )
    return rows


def english(rnd: random.Random) -> list[dict]:
    makers = {
        "place": lambda: invented_word(rnd, 3),
        "person": lambda: f"{invented_word(rnd, 2)} {invented_word(rnd, 3)}",
        "core": lambda: f"{invented_word(rnd, 2)} {rnd.choice(EN_NOUNS)}",
    }
    return build("en", EN_TEMPLATES, makers, lambda core: f"the {core}", str.lower)


def chinese(rnd: random.Random) -> list[dict]:
    makers = {
        "place": lambda: "".join(rnd.sample(ZH_PLACE_CHARS, 2)),
        "person": lambda: "".join(rnd.sample(ZH_NAME_CHARS, 2)) + "·" + "".join(rnd.sample(ZH_PLACE_CHARS, 2)),
        "core": lambda: (
            "".join(rnd.sample(ZH_PLACE_CHARS, 2)) + rnd.choice(ZH_ANSWER_HEADS) + rnd.choice(ZH_ANSWER_TAILS)
        ),
    }
    return build("zh", ZH_TEMPLATES, makers, lambda core: core, lambda v: v)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for lang, build in (("en", english), ("zh", chinese)):
        rows = build(random.Random(f"needle-bank-{lang}-v1"))
        with (OUT / f"needles_{lang}.jsonl").open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"wrote {len(rows)} {lang} needles")


if __name__ == "__main__":
    main()
