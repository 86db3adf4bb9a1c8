"""The prefix-cache replay behind ``bench/engine_order.py`` (the engine run checks it against vLLM's counts)."""

from __future__ import annotations

import pytest

from bench.prefix_cache import replay

BLOCK = 4


def _prompt(shared: int, own: int, tag: int) -> list[int]:
    """``shared`` tokens every prompt starts with, then ``own`` tokens of this prompt only."""
    return list(range(shared)) + [1000 * (tag + 1) + i for i in range(own)]


def test_one_at_a_time_reuses_the_previous_prompts_blocks_and_batches_of_one_agree() -> None:
    prompts = [_prompt(16, 8, t) for t in range(3)]  # 24 tokens: 6 blocks, the first 4 shared
    alone = replay(prompts, 20, BLOCK, 2)
    assert alone.prompt_tokens == 72 and alone.computed == 24 + 8 + 8
    assert replay(prompts, 20, BLOCK, 2, batches=[1, 1, 1]) == alone
    assert replay(prompts, None, BLOCK, 2).computed == 40  # unbounded: every distinct block once


def test_a_small_cache_evicts_and_a_batch_shares_blocks_in_flight() -> None:
    prompts = [_prompt(16, 8, 0), _prompt(0, 24, 1), _prompt(16, 8, 2)]
    # 7 blocks: the unrelated middle prompt evicts the shared prefix (oldest free blocks first)
    assert replay(prompts, 7, BLOCK, 2).computed == 72
    # sent together with room for all, the third finds the first's blocks while both are in flight
    assert replay(prompts, 30, BLOCK, 2, batches=[3]).computed == 24 + 24 + 8
    # a batch that does not fit runs in turns, as vLLM's scheduler waits for free blocks
    assert replay(prompts, 7, BLOCK, 2, batches=[3]).computed == 72


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="needs 7 blocks"):
        replay([_prompt(16, 8, 0)], 6, BLOCK, 2)
    with pytest.raises(ValueError, match="batches cover 2 requests; there are 3"):
        replay([_prompt(4, 4, t) for t in range(3)], 20, BLOCK, 2, batches=[2])
