"""How far the ``split`` fix moves needles: every prompt of the 4k and 8k suites, v2 and v1, measured.

OpenCompass's loaders build each prompt from the project's stand-in data files (``bench/standin.py``) and
``needlebench parity`` (``parity.py``) rebuilds it with the fix applied to OpenCompass's own
token list; this records, per profile and task, the share of prompts the fix touches and how many tokens the
moved needles went (max and median). ``tools/docs_pages.py`` renders the differences page's table from the
JSON, and ``tests/test_docs.py`` fails when the page and the JSON differ.

    python -m bench.placement            # writes bench/placement.json (about 15 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parent / "placement.json"
SUITES = ("4k", "8k")
PROFILES = ("v2", "v1")


def measure(suites: tuple[str, ...] = SUITES) -> dict:
    """Per profile and task, over every prompt of the suites: prompts, those ``split`` touches, needle moves."""
    from bench.standin import build_standin
    from needlebench.parity import check_parity

    out: dict = {"suites": list(suites), "profiles": {}}
    with tempfile.TemporaryDirectory() as tmp:
        data = build_standin(Path(tmp))
        for profile in PROFILES:
            cells = []
            for suite in suites:
                report = check_parity(data, profile, suite, every=True)
                if not report.passed:
                    raise SystemExit(f"{profile} {suite}: parity failed: {report.markdown()}")
                cells += report.cells
            tasks = {}
            for task in ("srt", "mrt", "mrs"):
                mine = [c for c in cells if c.task == task]
                split = [c for c in mine if "split" in c.tag.split("+")]
                moves = sorted(m for c in split for m in c.moves if m)
                tasks[task] = {
                    "prompts": len(mine),
                    "split": len(split),
                    "split_share": round(100 * len(split) / len(mine), 1),
                    "moved_needles": len(moves),
                    "move_tokens_max": moves[-1] if moves else 0,
                    "move_tokens_median": statistics.median(moves) if moves else 0,
                    "by_lang": {
                        lang: round(
                            100 * sum(c.lang == lang for c in split) / max(1, sum(c.lang == lang for c in mine)), 1
                        )
                        for lang in ("en", "zh")
                    },
                }
            out["profiles"][profile] = tasks
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    result = measure()
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
