"""The context builder: filler text cut to a token budget, needles at sentence boundaries.

Contract (spec section 2): a prompt for target length L and buffer B
measures at most L - B tokens and close to it; each needle starts at a
sentence boundary near its requested depth; a corpus that is too short
wraps around. Everything here is pure: corpora are tokenized once per
process (``tokenize_corpus``) and a repeat's haystack is the same text for
every length and depth, so cells differ only where the needles sit.

Token counts are exact without re-encoding the whole prompt: the haystack's
tokens are known, and inserting text only changes tokenization locally, so
each insertion's effect is measured by encoding a small window around it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .corpora import Corpus
from .errors import ConfigError
from .seeding import rng
from .tokenizer import get_encoding, token_byte_lengths

__all__ = [
    "TokenizedCorpus",
    "Haystack",
    "Placement",
    "FittedPrompt",
    "tokenize_corpus",
    "build_haystack",
    "fit_prompt",
]

_SEPARATOR = "\n\n"
_TERMINATORS = tuple(t.encode() for t in (".", "?", "!", "。", "？", "！"))
_CLOSERS = b" \t\r\n\"')]" + "”’」』）".encode()
_WINDOW = 24  # tokens either side of an insertion; cl100k pretokens are far shorter


@dataclass(frozen=True)
class TokenizedCorpus:
    """A corpus with each document encoded once (document + separator)."""

    corpus: Corpus
    encoding: str
    doc_tokens: tuple[np.ndarray, ...]
    doc_bytes: tuple[bytes, ...]

    @property
    def total_tokens(self) -> int:
        return int(sum(len(t) for t in self.doc_tokens))


@functools.lru_cache(maxsize=16)
def tokenize_corpus(corpus: Corpus, encoding: str = "cl100k_base") -> TokenizedCorpus:
    """Encode every document once per process; every sample reuses these tokens."""
    enc = get_encoding(encoding)
    texts = [d.strip() + _SEPARATOR for d in corpus.documents]
    tokens = enc.encode_ordinary_batch(texts, num_threads=1)
    return TokenizedCorpus(
        corpus,
        encoding,
        tuple(np.asarray(t, dtype=np.int64) for t in tokens),
        tuple(t.encode("utf-8") for t in texts),
    )


@functools.lru_cache(maxsize=8)
def _token_tables(encoding: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per token id: ends a sentence, ends with whitespace, starts with whitespace."""
    enc = get_encoding(encoding)
    n = enc.n_vocab
    ends_sentence = np.zeros(n, dtype=bool)
    trailing_ws = np.zeros(n, dtype=bool)
    leading_ws = np.zeros(n, dtype=bool)
    for token in range(n):
        try:
            raw = enc.decode_single_token_bytes(token)
        except KeyError:
            continue
        if not raw:
            continue
        ends_sentence[token] = raw.rstrip(_CLOSERS).endswith(_TERMINATORS)
        trailing_ws[token] = raw[-1:] in (b" ", b"\n", b"\t", b"\r")
        leading_ws[token] = raw[:1] in (b" ", b"\n", b"\t", b"\r")
    return ends_sentence, trailing_ws, leading_ws


@dataclass(frozen=True)
class Haystack:
    """One repeat's filler: bytes, token byte offsets and sentence boundaries.

    ``sentence_starts`` holds token counts k such that a new sentence starts
    after the first k tokens (0 and every document start included).
    """

    corpus_name: str
    lang: str
    data: bytes
    tok_end: np.ndarray
    sentence_starts: np.ndarray
    char_start: np.ndarray  # True where a token boundary is also a UTF-8 character boundary
    tokens: np.ndarray

    @property
    def n_tokens(self) -> int:
        return int(len(self.tok_end))

    def offset(self, k: int) -> int:
        """Byte offset of the boundary after the first ``k`` tokens."""
        return 0 if k <= 0 else int(self.tok_end[k - 1])


def build_haystack(tc: TokenizedCorpus, min_tokens: int, *coords: object) -> Haystack:
    """Concatenate documents in a seeded order until ``min_tokens``, wrapping around."""
    if not tc.doc_tokens:
        raise ConfigError(f"corpus {tc.corpus.name} holds no documents")
    parts_tokens: list[np.ndarray] = []
    parts_bytes: list[bytes] = []
    doc_starts: list[int] = []
    total = 0
    cycle = 0
    while total < min_tokens:
        order = list(range(len(tc.doc_tokens)))
        rng("haystack-order", tc.corpus.name, cycle, *coords).shuffle(order)
        for i in order:
            doc_starts.append(total)
            parts_tokens.append(tc.doc_tokens[i])
            parts_bytes.append(tc.doc_bytes[i])
            total += len(tc.doc_tokens[i])
            if total >= min_tokens:
                break
        cycle += 1
    tokens = np.concatenate(parts_tokens)
    data = b"".join(parts_bytes)
    lengths = token_byte_lengths(tc.encoding)
    tok_end = np.cumsum(lengths[tokens])
    ends_sentence, trailing_ws, leading_ws = _token_tables(tc.encoding)
    after = np.zeros(len(tokens), dtype=bool)  # boundary after token i starts a sentence
    if tc.corpus.lang == "zh":
        after[:] = ends_sentence[tokens]
    else:
        nxt = np.append(leading_ws[tokens[1:]], True)
        after[:] = ends_sentence[tokens] & (trailing_ws[tokens] | nxt)
    starts = np.flatnonzero(after) + 1
    starts = np.union1d(starts, np.asarray(doc_starts, dtype=np.int64))
    starts = starts[starts <= len(tokens)]
    raw = np.frombuffer(data, dtype=np.uint8)
    ends = tok_end[:-1]
    char_start = np.ones(len(tokens) + 1, dtype=bool)
    char_start[1:-1] = (raw[ends] & 0xC0) != 0x80
    return Haystack(tc.corpus.name, tc.corpus.lang, data, tok_end, starts, char_start, tokens)


@dataclass(frozen=True)
class Placement:
    """Where one inserted text went."""

    requested_depth: float
    token_index: int  # haystack tokens before it
    realised_depth: float


@dataclass(frozen=True)
class FittedPrompt:
    text: str
    tokens: int
    haystack_tokens: int
    budget: int
    placements: tuple[Placement, ...]


def _cut(hay: Haystack, h: int) -> int:
    """End the haystack at a sentence end close below ``h`` tokens, else at a character boundary."""
    h = max(0, min(h, hay.n_tokens))
    i = int(np.searchsorted(hay.sentence_starts, h, side="right")) - 1
    if i >= 0:
        candidate = int(hay.sentence_starts[i])
        if h - candidate <= max(56, h // 100):
            return candidate
    while h > 0 and not hay.char_start[h]:
        h -= 1
    return h


def _snap(hay: Haystack, target: float, cut: int) -> int:
    """The sentence start nearest ``target`` tokens, within the cut haystack."""
    starts = hay.sentence_starts
    hi = int(np.searchsorted(starts, cut, side="right"))
    if hi == 0:
        return 0
    pos = int(np.searchsorted(starts, target, side="left", sorter=None))
    best = None
    for j in (pos - 1, pos):
        if 0 <= j < hi:
            c = int(starts[j])
            if best is None or abs(c - target) < abs(best - target):
                best = c
    return best


def _needle_bytes(hay: Haystack, offset: int, end: int, text: str) -> bytes:
    """Join a needle to its neighbours the way prose would (space rules differ by language)."""
    if hay.lang == "zh":
        return text.encode()
    before = hay.data[offset - 1 : offset] if offset > 0 else b"\n"
    after = hay.data[offset : offset + 1] if offset < end else b"\n"
    if before.isspace():
        return (text + ("" if after.isspace() else " ")).encode()
    return (" " + text).encode()


def _window_delta(enc, hay: Haystack, lo: int, hi: int, inserts: list[tuple[int, bytes]]) -> int:
    """Token-count change caused by ``inserts`` (byte offset, bytes) inside tokens [lo, hi)."""
    while lo > 0 and not hay.char_start[lo]:
        lo -= 1
    while hi < hay.n_tokens and not hay.char_start[hi]:
        hi += 1
    a, b = hay.offset(lo), hay.offset(hi)
    original = hay.data[a:b]
    pieces = []
    cursor = a
    for off, ins in inserts:
        pieces.append(hay.data[cursor:off])
        pieces.append(ins)
        cursor = off
    pieces.append(hay.data[cursor:b])
    new = b"".join(pieces)
    return len(enc.encode_ordinary(new.decode("utf-8"))) - len(enc.encode_ordinary(original.decode("utf-8")))


def _assemble(
    hay: Haystack, cut: int, head: str, tail: str, needles: Sequence[tuple[float, str]], enc
) -> tuple[bytes, int, list[Placement]]:
    end_offset = hay.offset(cut)
    placements = []
    inserts: list[tuple[int, int, bytes]] = []  # (token index, order, bytes)
    for order, (depth, text) in enumerate(needles):
        k = _snap(hay, depth / 100.0 * cut, cut)
        off = hay.offset(k)
        realised = 100.0 * k / cut if cut else 0.0
        placements.append(Placement(float(depth), k, round(realised, 3)))
        inserts.append((k, order, _needle_bytes(hay, off, end_offset, text)))
    inserts.sort(key=lambda x: (x[0], x[1]))
    all_inserts = [(0, -1, head.encode())] + inserts + [(cut, 1 << 30, tail.encode())]
    # group insertions whose windows would overlap, and measure each group once
    count = cut
    group: list[tuple[int, int, bytes]] = []
    for item in all_inserts + [None]:
        if item is not None and (not group or item[0] - group[-1][0] <= 2 * _WINDOW):
            group.append(item)
            continue
        lo = max(0, group[0][0] - _WINDOW)
        hi = min(cut, group[-1][0] + _WINDOW)
        count += _window_delta(enc, hay, lo, hi, [(hay.offset(k), b) for k, _, b in group])
        group = [item] if item is not None else []
    pieces = [head.encode()]
    cursor = 0
    for k, _, b in inserts:
        off = hay.offset(k)
        pieces.append(hay.data[cursor:off])
        pieces.append(b)
        cursor = off
    pieces.append(hay.data[cursor:end_offset])
    pieces.append(tail.encode())
    return b"".join(pieces), count, placements


def fit_prompt(
    hay: Haystack,
    budget: int,
    head: str,
    tail: str,
    needles: Sequence[tuple[float, str]],
    encoding: str = "cl100k_base",
) -> FittedPrompt:
    """Fill ``head + haystack-with-needles + tail`` to at most ``budget`` tokens, as close as possible.

    The search is bounded and consumes no randomness: it lowers the haystack
    size by the measured excess until the prompt fits.
    """
    enc = get_encoding(encoding)
    overhead = len(enc.encode_ordinary(head)) + len(enc.encode_ordinary(tail))
    overhead += sum(len(enc.encode_ordinary(t)) + 1 for _, t in needles)
    h = budget - overhead
    if h <= 0:
        raise ConfigError(f"length budget {budget} tokens leaves no room for filler (needs {overhead} for the text)")
    if h > hay.n_tokens:
        raise ConfigError(f"haystack has {hay.n_tokens} tokens, {h} needed")
    for _ in range(8):
        cut = _cut(hay, h)
        data, count, placements = _assemble(hay, cut, head, tail, needles, enc)
        if count <= budget:
            return FittedPrompt(data.decode("utf-8"), count, cut, budget, tuple(placements))
        h -= count - budget
    raise ConfigError(f"could not fit the prompt into {budget} tokens")  # pragma: no cover
