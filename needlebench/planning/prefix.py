"""The prefix each prompt shares with the one sent before it: what a prefix cache can reuse, in tokens.

``needlebench plan`` counts a config's reusable prefix with it, ``plan --rates`` the earlier run's, so the two
are counted the same way. Prompts are compared as bytes (zero-copy views of the dataset cache's Arrow buffer),
each shared byte count scaled by its prompt's own tokens per byte.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..cache.rows import selected_rows

__all__ = ["common_prefix", "prompt_bytes", "shared_prefixes"]


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the common prefix of two uint8 arrays, compared in growing blocks.

    Args:
        a: the first byte string, as a uint8 array.
        b: the second.
    """
    n = min(len(a), len(b))
    i, step = 0, 4096
    while i < n:
        j = min(n, i + step)
        diff = np.flatnonzero(a[i:j] != b[i:j])
        if len(diff):
            return i + int(diff[0])
        i, step = j, step * 2
    return n


def prompt_bytes(rows: Any) -> list[np.ndarray]:
    """Each row's prompt as a zero-copy uint8 view of the Arrow buffer (UTF-8 bytes).

    Args:
        rows: a dataset's rows (``cache.rows.load_rows``), or a selection of them.
    """
    column = selected_rows(rows).data.table.column("prompt")  # a selection: only its rows
    out: list[np.ndarray] = []
    for chunk in column.chunks:
        _, offsets_buf, data_buf = chunk.buffers()
        width = np.int64 if str(chunk.type) == "large_string" else np.int32
        offsets = np.frombuffer(offsets_buf, dtype=width)[chunk.offset : chunk.offset + len(chunk) + 1]
        data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
        out.extend(data[offsets[k] : offsets[k + 1]] for k in range(len(chunk)))
    return out


def shared_prefixes(prompts: list[np.ndarray], tokens: list[int]) -> list[float]:
    """Estimated tokens each prompt shares with the one before it (bytes scaled by its own tokens per byte).

    Args:
        prompts: the prompts in the order sent (:func:`prompt_bytes`).
        tokens: each prompt's tokens.
    """
    shared = [0.0] * len(prompts)
    for k in range(1, len(prompts)):
        size = len(prompts[k])
        if size:
            shared[k] = common_prefix(prompts[k - 1], prompts[k]) * tokens[k] / size
    return shared
