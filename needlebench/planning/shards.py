"""Split a stream of samples into shards of about equal prompt tokens.

A 1000k prompt costs far more prefill than a 1k one, so shards balance
tokens, not sample counts. Shards are contiguous runs of the request
stream (``stream.py``), which puts prompts that share a haystack prefix
next to each other, across datasets too, so an inference server's prefix
cache can reuse them.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["balanced_cuts", "shard_ranges"]


def balanced_cuts(costs: Sequence[int], shards: int) -> list[int]:
    """Boundaries b_0=0 < ... < b_n=len(costs) so each run's total is near total/shards.

    Each boundary is the prefix position closest to its ideal cumulative
    total; empty shards are dropped.

    Args:
        costs: the cost (prompt tokens) of each sample, in generation order; negatives count as 0.
        shards: how many runs are wanted (at most one per sample).
    """
    n = len(costs)
    if n == 0:
        return [0]
    shards = max(1, min(shards, n))
    prefix = [0]
    for c in costs:
        prefix.append(prefix[-1] + max(0, int(c)))
    total = prefix[-1]
    cuts = [0]
    j = 0
    for k in range(1, shards):
        ideal = total * k / shards
        while j < n and prefix[j + 1] <= ideal:
            j += 1
        best = j if abs(prefix[j] - ideal) <= abs(prefix[min(j + 1, n)] - ideal) else j + 1
        best = max(best, cuts[-1] + 1)
        if best >= n:
            break
        cuts.append(best)
    cuts.append(n)
    return cuts


def shard_ranges(costs: Sequence[int], shards: int) -> list[tuple[int, int]]:
    """The (start, end) index ranges of ``shards`` contiguous runs of about equal total cost.

    Args:
        costs: the cost (prompt tokens) of each sample, in generation order.
        shards: how many ranges are wanted; fewer come back when there are fewer samples.
    """
    cuts = balanced_cuts(costs, shards)
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
