"""Snapshot person-name pools from Faker into needlebench/data/names/ (committed package data).

Generation reads these files, never Faker itself, so a Faker upgrade can
never change a prompt. Names containing a relationship word are dropped.

    python tools/make_name_pools.py
"""

from __future__ import annotations

import json
from pathlib import Path

from faker.providers.person.en_US import Provider as English
from faker.providers.person.zh_CN import Provider as Chinese

OUT = Path(__file__).resolve().parents[1] / "needlebench" / "data" / "names"
EN_BANNED = ("father", "mother", "dad", "mom", "grand", "maternal", "paternal", "son", "daughter")
ZH_BANNED = set("父母爸妈爷奶姥公婆外祖孙儿女子是的")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    en_first = sorted({n for n in English.first_names if n.isalpha() and not any(b in n.lower() for b in EN_BANNED)})
    en_last = sorted({n for n in English.last_names if n.isalpha() and not any(b in n.lower() for b in EN_BANNED)})
    zh_first = sorted({n for n in Chinese.first_names if not set(n) & ZH_BANNED})
    zh_last = sorted({n for n in Chinese.last_names if not set(n) & ZH_BANNED and len(n) <= 2})
    for lang, first, last in (("en", en_first, en_last), ("zh", zh_first, zh_last)):
        path = OUT / f"names_{lang}.json"
        path.write_text(
            json.dumps(
                {"source": "faker person providers (en_US / zh_CN)", "first": first, "last": last},
                ensure_ascii=False,
                indent=0,
            )
            + "\n",
            encoding="utf-8",
        )
        print(f"{path}: {len(first)} first, {len(last)} last")


if __name__ == "__main__":
    main()
