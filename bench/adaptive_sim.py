"""The adaptive length ladder against the full grid, on scripted models whose accuracy falls with length along known
curves (``needlebench/adaptive/ladder.py``).

Each model answers each prompt of a grid right or wrong by a seeded draw at its accuracy for the prompt's length
and depth; the same draws serve the full grid and the ladder (the ladder asks a subset of the full grid's
prompts, so both see the same answers where both ask). Per model and grid:

* the full grid's effective length and its 95% interval (``aggregate.effective_length``, the reports' code);
* the ladder's effective length, its rounds, and the prompt tokens it asked against the full grid's (a prompt
  counts its length in tokens);
* whether the ladder's effective length equals the full grid's or lies inside its interval.

Curves (log2 length x): logistic (midpoints evenly over the grid's positions, from a step before its shortest
length to a step past its longest; four slopes, three tops, three floors),
steps, plateaus, dips that recover at one length, and "lost in the middle" (middle depths fail first). Grids: the
128k and the 1000k suites of NeedleBench v2 (11 depths, 10 repeats: S-RT's 110 prompts a length), and the 1000k
suite with the rungs past 1M (2M, 4M, 8M) as the ladder's open extension, against the full grid of all 12 lengths.

    .venv/bin/python -m bench.adaptive_sim                    # bench/adaptive_sim.json
    .venv/bin/python -m bench.adaptive_sim --models 40 --out /tmp/x.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from statistics import median
from typing import Any

from needlebench.adaptive.ladder import LadderSettings, next_round
from needlebench.aggregate.effective_length import EffectiveRule, LengthCell, effective_length
from needlebench.seeding import stable_seed
from needlebench.tasks.profiles import LINEAR_DEPTHS, SUITES

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 10
SEED = 2026

Curve = Callable[[int, float], float]  # (length, depth) -> accuracy


def _logistic(mid: float, slope: float, top: float, floor: float) -> Curve:
    return lambda n, d: floor + (top - floor) / (1 + math.exp(slope * (math.log2(n) - mid)))


def _curves(lengths: tuple[int, ...], count: int) -> Iterator[tuple[str, Curve]]:
    """``count`` scripted models for a grid: every family, their parameters spread over the grid's range."""
    lo, hi = math.log2(lengths[0]), math.log2(lengths[-1])
    family: list[tuple[str, Curve]] = []
    logs = [math.log2(n) for n in lengths]
    for i in range(16):  # midpoints spread evenly over the grid's positions, from a step before it to a step past
        at = -1 + (len(lengths) + 1) * i / 15
        j = min(max(int(math.floor(at)), 0), len(logs) - 2)
        mid = logs[j] + (logs[j + 1] - logs[j]) * (at - j)
        for slope in (0.7, 1.5, 3.0, 8.0):
            for top, floor in ((1.0, 0.0), (0.95, 0.1), (0.85, 0.3)):
                family.append(
                    (
                        f"logistic mid 2^{mid:.1f} slope {slope} top {top} floor {floor}",
                        _logistic(mid, slope, top, floor),
                    )
                )
    for cut in lengths[1:]:  # steps
        for top, low in ((1.0, 0.0), (0.9, 0.5)):
            family.append((f"step at {cut} {top}->{low}", lambda n, d, c=cut, t=top, b=low: t if n < c else b))
    for level in (1.0, 0.97, 0.9, 0.75, 0.5, 0.2):  # plateaus
        family.append((f"plateau {level}", lambda n, d, v=level: v))
    for dip in lengths[1:-1]:  # a dip that recovers
        family.append((f"dip at {dip}", lambda n, d, x=dip: 0.3 if n == x else 0.97))
    for mid in (lo + (hi - lo) * f for f in (0.3, 0.6, 0.9)):  # lost in the middle: middle depths fall first
        family.append(
            (
                f"lost in the middle from 2^{mid:.1f}",
                lambda n, d, m=mid: (
                    0.98 if math.log2(n) < m or d <= 20 or d >= 80 else 0.98 - 0.8 * min(1.0, math.log2(n) - m)
                ),
            )
        )
    logistic = [f for f in family if f[0].startswith("logistic")]
    others = [f for f in family if not f[0].startswith("logistic")]  # every step, plateau, dip and middle
    room = max(0, count - len(others))
    chosen = others[:count] + [logistic[int(i * len(logistic) / room)] for i in range(room)] if room else others[:count]
    yield from chosen


def _answers(name: str, curve: Curve, grid: dict[int, list[tuple[float, int]]]) -> dict[tuple[int, float, int], float]:
    """Every prompt of the grid answered right (1) or wrong (0) by a seeded draw at the curve's accuracy."""
    out = {}
    for n, cells in grid.items():
        for d, r in cells:
            u = (stable_seed("adaptive_sim", SEED, name, n, d, r) % 10**9) / 10**9
            out[(n, d, r)] = 1.0 if u < curve(n, d) else 0.0
    return out


def _full(name: str, answers: dict, grid: dict, rule: EffectiveRule) -> Any:
    cells = [LengthCell(n, tuple(100 * answers[(n, d, r)] for d, r in grid[n]), True) for n in sorted(grid)]
    return effective_length(cells, rule, "adaptive_sim", name)


def _ladder(answers: dict, grid: dict, settings: LadderSettings) -> tuple[Any, int, set]:
    asked: dict[tuple[int, float, int], float] = {}
    tokens = {n: float(n) for n in grid}
    rounds = 0
    while True:
        step = next_round(grid, asked, tokens, settings)
        if not step.asks:
            return step, rounds, set(asked)
        rounds += 1
        for n, cells in step.asks.items():
            for d, r in cells:
                asked[(n, d, r)] = answers[(n, d, r)]


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
    for name, curve in _curves(lengths, count):
        answers = _answers(name, curve, grid)
        full = _full(name, answers, grid, settings.rule)
        step, rounds, asked = _ladder(answers, grid, settings)
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
