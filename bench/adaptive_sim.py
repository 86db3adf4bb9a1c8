"""The adaptive length ladder against the full grid, on scripted models whose accuracy falls with length along known
curves (``needlebench/adaptive/ladder.py``).

Each model answers each prompt of a grid right or wrong by a seeded draw at its accuracy for the prompt's length
and depth; the same draws serve the full grid and the ladder (the ladder asks a subset of the full grid's
prompts, so both see the same answers where both ask). Per model and grid:

* the full grid's effective length and its 95% interval (``aggregate.effective_length``, the reports' code);
* the ladder's effective length, its rounds, and the prompt tokens it asked against the full grid's (a prompt
  counts its length in tokens);
* whether the ladder's effective length equals the full grid's or lies inside its interval.

Curves: ``needlebench/adaptive/scenarios.py``'s (logistic over log length, steps, plateaus, dips that recover at
one length, and "lost in the middle": middle depths fail first), the ones ``needlebench plan --adaptive`` climbs. Grids: the
128k and the 1000k suites of NeedleBench v2 (11 depths, 10 repeats: S-RT's 110 prompts a length), and the 1000k
suite with the rungs past 1M (2M, 4M, 8M) as the ladder's open extension, against the full grid of all 12 lengths.

    .venv/bin/python -m bench.adaptive_sim                    # bench/adaptive_sim.json
    .venv/bin/python -m bench.adaptive_sim --models 40 --out /tmp/x.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path
from statistics import median
from typing import Any

from needlebench.adaptive.ladder import LadderSettings
from needlebench.adaptive.scenarios import answer, climb, curves
from needlebench.aggregate.effective_length import EffectiveRule, LengthCell, effective_length
from needlebench.tasks.profiles import LINEAR_DEPTHS, SUITES

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 10
SEED = 2026


def _full(name: str, answers: dict, grid: dict, rule: EffectiveRule) -> Any:
    cells = [LengthCell(n, tuple(100 * answers[(n, d, r)] for d, r in grid[n]), True) for n in sorted(grid)]
    return effective_length(cells, rule, "adaptive_sim", name)


def _agrees(full: Any, value: int | None, edge: str) -> bool:
    if edge == "undetermined":
        return False
    if value == full.value:
        return True
    lengths = full.lengths
    low = -1 if full.ci_low is None else lengths.index(full.ci_low)
    high = -1 if full.ci_high is None else lengths.index(full.ci_high)
    at = -1 if value is None else lengths.index(value)
    return low <= at <= high


def run_grid(suite: str, count: int, settings: LadderSettings) -> dict[str, Any]:
    lengths = SUITES[suite].lengths + settings.extend
    grid = {n: [(float(d), r) for d in LINEAR_DEPTHS for r in range(REPEATS)] for n in lengths}
    full_tokens = sum(n * len(cells) for n, cells in grid.items())
    models, shares = [], []
    tokens = {n: float(n) for n in grid}
    for name, curve in curves(lengths, count):
        answers = {(n, d, r): answer(name, curve, n, d, r, SEED) for n, cells in grid.items() for d, r in cells}
        full = _full(name, answers, grid, settings.rule)
        step, asked, rounds = climb(grid, tokens, settings, lambda n, d, r, answers=answers: answers[(n, d, r)])
        value, edge, open_at = step.effective
        share = sum(n for n, _, _ in asked) / full_tokens
        shares.append(share)
        models.append(
            {
                "model": name,
                "full": {"value": full.value, "edge": full.edge, "ci": [full.ci_low, full.ci_high]},
                "adaptive": {"value": value, "edge": edge, "open_at": open_at, "rounds": rounds, "prompts": len(asked)},
                "token_share": round(share, 4),
                "agrees": _agrees(full, value, edge),
            }
        )
    agree = sum(m["agrees"] for m in models)
    return {
        "suite": suite + (f" + rungs {', '.join(str(n) for n in settings.extend)}" if settings.extend else ""),
        "lengths": list(lengths),
        "prompts_per_length": len(LINEAR_DEPTHS) * REPEATS,
        "models": len(models),
        "agree": agree,
        "agree_share": agree / len(models),
        "token_share_median": median(shares),
        "token_share_p90": sorted(shares)[int(0.9 * (len(shares) - 1))],
        "failures": [m for m in models if not m["agrees"]],
        "per_model": models,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=200, help="scripted models per grid")
    parser.add_argument("--out", default=str(ROOT / "bench" / "adaptive_sim.json"))
    args = parser.parse_args()
    settings = LadderSettings()
    start = time.perf_counter()
    grids = [run_grid(suite, args.models, settings) for suite in ("128k", "1000k")]
    # the rungs past 1M, climbed once every length of the 1000k suite passed (the full grid asks them all)
    grids.append(
        run_grid("1000k", args.models, dataclasses.replace(settings, extend=(2_000_000, 4_000_000, 8_000_000)))
    )
    result = {
        "settings": {
            "delta": settings.delta,
            "first": settings.first,
            "growth": settings.growth,
            "rule": settings.rule.label,
        },
        "seed": SEED,
        "grids": grids,
        "seconds": round(time.perf_counter() - start, 1),
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for g in grids:
        print(
            f"{g['suite']}: {g['agree']}/{g['models']} agree ({g['agree_share']:.1%}); prompt tokens median "
            f"{g['token_share_median']:.1%}, p90 {g['token_share_p90']:.1%} of the full grid's"
        )


if __name__ == "__main__":
    main()
