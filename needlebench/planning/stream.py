"""The order a model's samples reach the engine: datasets that share a haystack, interleaved.

OpenCompass infers a task's datasets one after another, so two datasets whose prompts
open with the same text (S-RT and M-RS of one language: the same instructions and, per
repeat, the same haystack up to the first needle) meet in the engine's prefix cache only
if it holds a whole dataset. Cutting each such dataset into its per-repeat runs and
sending the runs of one haystack together, S-RT's and M-RS's alternating by the position
of their first needle, farthest first (the order each dataset already has inside), lets a
cache of one or two prompts capture the reuse an unbounded one would
(``bench/engine_order.py``). A piece holds at least a batch (the model's ``batch_size``), since
OpenCompass batches only inside one dataset part, except a haystack group's first piece: its one
prompt with the farthest needle goes alone. That prompt holds the whole haystack every other prompt
of the group opens with, so once it is cached the batches after it (all in flight together) reuse
it instead of each computing the shared haystack at the same time. Where the group's next row comes
from the lead's own dataset, the two are one contiguous range and so one part: the lead then rides
in that part's first batch.

Nothing about a dataset changes: each keeps its rows in their order, so a piece of it is
a contiguous ``test_range`` (the partitioner's numbered parts, which OpenCompass's eval
task merges back). A dataset that shares with no other stays one run.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence

__all__ = ["HEAD_CHARS", "Row", "interleave"]

# prompt characters two datasets' first prompts must agree on before they share a haystack group: past
# any instruction head (English: ~120 characters where S-RT and M-RT part), within the shortest document
# (a 1k Chinese prompt is ~1,600 characters in all)
HEAD_CHARS = 400

# (haystack group or None, first needle's token position): a task's ``TaskSpec.prefix_group`` of a row
Row = tuple[Hashable, float]


def interleave(rows: Sequence[Sequence[Row]], heads: Sequence[str], min_run: int = 1) -> list[tuple[int, int]]:
    """One stream over several datasets' rows, those sharing a haystack group sent together.

    A k-way merge of the datasets (each keeps its row order): the next row is the one, among the
    datasets' next rows, whose group came first (groups ranked by first appearance, datasets in
    order), then whose first needle lies farthest in. Datasets whose opening text differs from
    the first dataset of their group (``heads``) get groups of their own, as do rows without one,
    so they stay whole runs where they are.

    Args:
        rows: per dataset, per row, its (group, first needle position) (its task's ``prefix_group``).
        heads: per dataset, the opening of its first prompt (``HEAD_CHARS`` characters).
        min_run: rows a dataset sends at least once it is picked (while its group lasts): the model's
            ``batch_size``, so OpenCompass's batches stay full (it batches inside a piece only), and
            the prompts a batch leaves behind are what the next piece reuses. A shared group's first
            row (its farthest needle) is a piece of its own, the lead the group's batches reuse.

    Returns:
        (dataset index, row index) pairs, every row of every dataset exactly once.
    """
    leader: dict[Hashable, int] = {}  # group -> the first dataset seen with it
    own: list[bool] = []  # the dataset shares no prefix with its groups' leaders
    for di, per in enumerate(rows):
        groups = {g for g, _ in per if g is not None}
        for g in groups:
            leader.setdefault(g, di)
        own.append(any(heads[leader[g]] != heads[di] for g in groups) or not groups)
    rank: dict[Hashable, int] = {}
    keyed: list[list[tuple[int, float]]] = []
    for di, per in enumerate(rows):
        out = []
        for g, pos in per:
            k = ("dataset", di) if own[di] or g is None else g
            out.append((rank.setdefault(k, len(rank)), -pos))
        keyed.append(out)
    heap = [(keyed[di][0], di) for di in range(len(rows)) if keyed[di]]
    heapq.heapify(heap)
    nxt = [0] * len(rows)
    # the ranks of groups several prompts share (a dataset's own group holds no common haystack)
    shared = {rank[g] for di, per in enumerate(rows) if not own[di] for g, _ in per if g is not None}
    started: set[int] = set()
    stream: list[tuple[int, int]] = []
    while heap:
        _, di = heapq.heappop(heap)
        ri = nxt[di]
        group = keyed[di][ri][0]
        run = max(1, min_run) if group in started or group not in shared else 1  # a group's lead goes alone
        started.add(group)
        end = ri + 1
        while end < len(keyed[di]) and end - ri < run and keyed[di][end][0] == group:
            end += 1
        stream.extend((di, r) for r in range(ri, end))
        nxt[di] = end
        if end < len(keyed[di]):
            heapq.heappush(heap, (keyed[di][end], di))
    return stream
