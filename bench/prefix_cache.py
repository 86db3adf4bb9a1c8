"""A model of vLLM's automatic prefix cache, to compare request orders at any cache size.

vLLM (v1) hashes each full block of ``block_size`` prompt tokens together with
its parent's hash; a request reuses the longest chain of cached blocks from its
start (never its last token: at least one token is always computed), computes
the rest, and on finishing returns its blocks to a free queue whose head is
evicted first, tail blocks of a request ahead of its head blocks. A block that
is reused is taken off the free queue. This module replays that policy for
requests sent one at a time or in batches, so an order can be scored at cache sizes no engine
run could afford to sweep; ``bench/engine_order.py`` checks it against the real
engine's counters at the sizes it runs.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CacheResult:
    """Prompt tokens of one replay, split as vLLM's ``prompt_tokens_by_source`` splits them."""

    prompt_tokens: int
    computed: int  # vLLM's ``local_compute``

    @property
    def hit(self) -> int:
        """Tokens served from the cache (vLLM's ``local_cache_hit``)."""
        return self.prompt_tokens - self.computed


def _block_hashes(tokens: Sequence[int], block_size: int) -> list[int]:
    out: list[int] = []
    parent = 0
    for i in range(len(tokens) // block_size):
        parent = hash((parent, tuple(tokens[i * block_size : (i + 1) * block_size])))
        out.append(parent)
    return out


def replay(
    requests: Sequence[Sequence[int]],
    blocks: int | None,
    block_size: int,
    max_tokens: int,
    batches: Sequence[int] | None = None,
) -> CacheResult:
    """Replay prompts through a prefix cache of ``blocks`` blocks, one batch in flight at a time.

    Args:
        requests: each prompt's token ids (the chat template applied), in sending order.
        blocks: usable KV blocks (vLLM's ``num_gpu_blocks`` less its one null block); None: unbounded.
        block_size: tokens per block (vLLM's ``--block-size``).
        max_tokens: tokens generated per request (their blocks take room, and are never reused).
        batches: the sizes of the consecutive batches sent together (OpenCompass's ``batch_size``,
            cut at dataset boundaries); None: one request at a time. Inside a batch, requests are
            admitted in order while their blocks fit (each finds the blocks of those admitted before
            it: vLLM registers a block's hash when it allocates it); the admitted ones finish
            together, then the rest of the batch is admitted.

    Raises:
        ValueError: a request needs more blocks than the cache has.
    """
    # the free queue: block keys in eviction order (first = evicted first); a key is a block's hash
    # while it holds a reusable prompt block, else a unique negative number
    queue: OrderedDict[int, None] = OrderedDict((-(i + 1), None) for i in range(blocks or 0))
    seen: set[int] = set()  # unbounded cache: every block hash ever computed
    anonymous = blocks or 0
    computed = prompt_tokens = 0
    sizes = list(batches) if batches is not None else [1] * len(requests)
    if sum(sizes) != len(requests):
        raise ValueError(f"batches cover {sum(sizes)} requests; there are {len(requests)}")
    at = 0
    for size in sizes:
        pending = [list(t) for t in requests[at : at + size]]
        at += size
        while pending:
            running: list[tuple[list[int], int]] = []  # (hashes, blocks needed)
            in_use: set[int] = set()  # hashes held by running requests (off the free queue)
            while pending:
                tokens = pending[0]
                hashes = _block_hashes(tokens, block_size)
                hit = 0
                while (
                    hit < len(hashes)
                    and (hashes[hit] in (seen if blocks is None else queue) or hashes[hit] in in_use)
                    and (hit + 1) * block_size <= len(tokens) - 1
                ):
                    hit += 1
                need = -(-(len(tokens) + max_tokens) // block_size)
                if blocks is not None:
                    if need > blocks:
                        raise ValueError(
                            f"a request of {len(tokens)} tokens needs {need} blocks; the cache has {blocks}"
                        )
                    fresh = [h for h in hashes[:hit] if h not in in_use]
                    if need - (hit - len(fresh)) > len(queue) and running:
                        break  # waits for the running requests to finish
                    for h in fresh:
                        del queue[h]  # in use again
                    for _ in range(need - hit):
                        queue.popitem(last=False)  # the oldest free block, evicting what it cached
                pending.pop(0)
                computed += len(tokens) - hit * block_size
                prompt_tokens += len(tokens)
                if blocks is None:
                    seen.update(hashes)
                    continue
                running.append((hashes, need))
                in_use.update(hashes)
            # finished: generated and partial blocks are freed first, then the prompt's full blocks, last first
            for hashes, need in running:
                own = [h for h in hashes if h not in queue]  # not freed already by a request sharing them
                for _ in range(need - len(hashes)):
                    anonymous += 1
                    queue[-anonymous] = None
                for h in reversed(own):
                    queue[h] = None
    return CacheResult(prompt_tokens=prompt_tokens, computed=computed)
