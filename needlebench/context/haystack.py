"""The context builder: filler text cut to a token budget, needles placed in it.

Two ways to use it. Ours (``build_haystack`` + ``fit_prompt``, the
``haystack="seeded"`` option): a prompt for target length L and buffer B
measures at most L - B tokens and close to it, and each needle starts at a
sentence boundary near its requested depth. OpenCompass's
(``build_ordered_haystack`` + ``place_at``, the reference): documents in a
given order with no separator, cut at an exact token count, needles at given
token indices (``context.reference`` decides both). Either way a corpus that
is too short wraps around.

Pure (no I/O, no global random state): ``tokenize_corpus``,
``build_haystack``, ``build_ordered_haystack``, ``fit_prompt``, ``place_at`` and ``text_tokens`` are functions of
their arguments (the first is also memoised per process), and a repeat's
haystack is the same text for every length and depth, so cells differ only
where the needles sit. Not pure: ``load_tokenized`` reads the corpus files
and keeps the tokenized corpus in an npz cache file under
``<cache>/corpora/`` (see ``files.cached_file``), written once and reused
by later processes.

Token counts are exact without re-encoding the whole prompt: the haystack's
tokens are known, and inserting text only changes tokenization locally, so
each insertion's effect is measured by encoding a small window around it.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..files import cache_dir, cached_file, code_digest
from ..seeding import content_digest, rng
from .corpora import Corpus
from .tokenizer import count_tokens, get_encoding, token_byte_lengths

__all__ = [
    "TokenizedCorpus",
    "Haystack",
    "Placement",
    "FittedPrompt",
    "tokenize_corpus",
    "load_tokenized",
    "build_haystack",
    "build_ordered_haystack",
    "fit_prompt",
    "place_at",
    "snap_to_sentence",
    "text_tokens",
]

_SEPARATOR = "\n\n"
_TERMINATORS = tuple(t.encode() for t in (".", "?", "!", "。", "？", "！"))
_CLOSERS = b" \t\r\n\"')]" + "”’」』）".encode()


_CACHE_FORMAT = "2"


@dataclass(frozen=True)
class TokenizedCorpus:
    """A corpus with each document encoded once (document + separator).

    ``separator`` is ``"\n\n"`` for our haystack (documents stripped and joined by a blank line) and
    ``""`` for OpenCompass's (each document encoded as the file holds it, token lists concatenated).
    """

    corpus: Corpus
    encoding: str
    doc_tokens: tuple[np.ndarray, ...]
    doc_bytes: tuple[bytes, ...]
    separator: str = _SEPARATOR

    @property
    def total_tokens(self) -> int:
        """Tokens over all documents."""
        return int(sum(len(t) for t in self.doc_tokens))


@functools.lru_cache(maxsize=16)
def tokenize_corpus(corpus: Corpus, encoding: str = "cl100k_base", raw: bool = False) -> TokenizedCorpus:
    """Encode every document (plus the separator) once per process; every sample reuses these tokens.

    Args:
        corpus: the documents to encode.
        encoding: tiktoken encoding name.
        raw: encode each document exactly as given, with no separator (OpenCompass's haystack), instead of
            stripped and followed by a blank line (ours).
    """
    enc = get_encoding(encoding)
    separator = "" if raw else _SEPARATOR
    texts = [d if raw else d.strip() + separator for d in corpus.documents]
    tokens = enc.encode_ordinary_batch(texts, num_threads=1)
    return TokenizedCorpus(
        corpus,
        encoding,
        tuple(np.asarray(t, dtype=np.int64) for t in tokens),
        tuple(t.encode("utf-8") for t in texts),
        separator,
    )


# the modules whose code decides what a tokenized-corpus cache file holds
_CACHE_MODULES = ("context/corpora.py", "context/haystack.py", "context/tokenizer.py")


def _cache_code_digest() -> str:
    """Digest of the reader, normaliser and tokenizer sources (a test patches it to force a rebuild)."""

    return code_digest(*_CACHE_MODULES)


def _write_tokenized(tc: TokenizedCorpus, path: Path) -> dict[str, int]:
    """Write ``tc`` as an npz file at ``path``; the documents' count goes into the sidecar."""
    import json

    info = json.dumps({"name": tc.corpus.name, "source": tc.corpus.source, "separator": tc.separator}).encode()
    np.savez(
        path,
        tokens=np.concatenate(tc.doc_tokens).astype(np.int32),
        tok_lens=np.array([len(t) for t in tc.doc_tokens], dtype=np.int64),
        data=np.frombuffer(b"".join(tc.doc_bytes), dtype=np.uint8),
        byte_lens=np.array([len(b) for b in tc.doc_bytes], dtype=np.int64),
        info=np.frombuffer(info, dtype=np.uint8),
    )
    return {"documents": len(tc.doc_tokens)}


def _read_tokenized(path: Path, lang: str, encoding: str, documents: int) -> TokenizedCorpus:
    """Read a verified npz cache file back into a ``TokenizedCorpus``."""
    import json

    with np.load(path, allow_pickle=False) as z:
        info = json.loads(bytes(z["info"]).decode())
        tokens, data = z["tokens"], bytes(z["data"])
        tok_lens, byte_lens = z["tok_lens"], z["byte_lens"]
    if len(tok_lens) != documents or len(byte_lens) != documents:
        raise ValueError(f"{path}: {len(tok_lens)} documents, the sidecar says {documents}")
    tok_cuts = np.cumsum(tok_lens)[:-1]
    byte_cuts = np.cumsum(byte_lens).tolist()
    doc_bytes = tuple(data[a:b] for a, b in zip([0, *byte_cuts[:-1]], byte_cuts))
    separator = info.get("separator", _SEPARATOR)
    texts = (b.decode("utf-8") for b in doc_bytes)
    docs = tuple(t[: len(t) - len(separator)] for t in texts)
    corpus = Corpus(info["name"], lang, docs, info["source"])
    return TokenizedCorpus(corpus, encoding, tuple(np.split(tokens.astype(np.int64), tok_cuts)), doc_bytes, separator)


@functools.lru_cache(maxsize=8)
def load_tokenized(
    lang: str, choice: str = "packaged", encoding: str = "cl100k_base", raw: bool = False
) -> TokenizedCorpus:
    """A corpus with its tokens, from the on-disk cache when its inputs and code are unchanged.

    Every OpenCompass task is a new process; reading ~3M tokens back takes
    milliseconds where normalising and encoding the corpus takes seconds.
    The key covers the corpus files' contents and the source of the modules
    that read, normalise and tokenize them, so an edited reader never serves
    stale text. One process builds the file while concurrent ones wait
    (:func:`needlebench.files.cached_file`); a truncated or corrupt file is rebuilt.

    Args:
        lang: ``"en"`` or ``"zh"``.
        choice: one of ``corpora.CORPUS_CHOICES`` or a file path.
        encoding: tiktoken encoding name.
        raw: OpenCompass's form: documents as the files hold them (no re-wrapping, no stripping), no separator.
    """
    from ..seeding import stable_hash
    from .corpora import corpus_digest, load_corpus

    key = stable_hash(corpus_digest(lang, choice), choice, encoding, raw, _CACHE_FORMAT, _cache_code_digest())
    path = cache_dir() / "corpora" / f"{lang}-{key}.npz"

    def build() -> TokenizedCorpus:
        return tokenize_corpus(load_corpus(lang, choice, raw), encoding, raw)

    try:
        record = cached_file(path, lambda tmp: _write_tokenized(build(), tmp))
    except OSError:
        return build()  # a read-only cache only costs speed
    return _read_tokenized(path, lang, encoding, record["documents"])


@functools.lru_cache(maxsize=8)
def _token_tables(encoding: str) -> tuple[np.ndarray, ...]:
    """Per token id: ends a sentence, ends / starts with whitespace, ends with a letter or digit,
    starts with a character that is neither (the last two decide stable pretoken boundaries)."""
    enc = get_encoding(encoding)
    n = enc.n_vocab
    ends_sentence = np.zeros(n, dtype=bool)
    trailing_ws = np.zeros(n, dtype=bool)
    leading_ws = np.zeros(n, dtype=bool)
    ends_alnum = np.zeros(n, dtype=bool)
    starts_other = np.zeros(n, dtype=bool)
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
        # only a whole character at a token's edge can vouch for that edge
        text = raw.decode("utf-8", errors="ignore")
        if text:
            ends_alnum[token] = raw.endswith(text[-1].encode()) and text[-1].isalnum()
            starts_other[token] = raw.startswith(text[0].encode()) and not text[0].isalnum()
    return ends_sentence, trailing_ws, leading_ws, ends_alnum, starts_other


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
    stable: np.ndarray  # sorted token counts k whose boundary is a pretoken boundary in any context
    # document starts where documents touch with no separator (OpenCompass's haystack): tokens encoded
    # per document may merge differently across such a join, so the prompt's count re-encodes around it
    joins: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # token counts of re-encoded intervals, (encoding, lo, hi, inserts) -> tokens: every length and depth of a repeat
    # cuts this haystack, so the same interval (a document join, a needle at the same place) recurs across
    # cells; a pure function of the key, so a memo changes no count
    interval_memo: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def n_tokens(self) -> int:
        """Length of the haystack in tokens (its ``min_tokens`` and a short look-ahead, or whole documents
        when they end sooner)."""
        return int(len(self.tok_end))

    def offset(self, k: int) -> int:
        """Byte offset of the boundary after the first ``k`` tokens."""
        return 0 if k <= 0 else int(self.tok_end[k - 1])


def build_haystack(tc: TokenizedCorpus, min_tokens: int, *coords: object) -> Haystack:
    """Concatenate documents in a seeded order until ``min_tokens``, wrapping around the corpus.

    Why seeded by ``coords``: every length and depth of one repeat cuts the same haystack, so cells
    differ only where the needles sit; a different repeat gets a different document order.

    Args:
        tc: the tokenized corpus.
        min_tokens: stop once at least this many tokens are gathered (whole documents only).
        coords: what seeds the document order, e.g. the task, language and repeat.

    Raises:
        ConfigError: the corpus holds no documents.
    """
    if not tc.doc_tokens:
        raise ConfigError(f"corpus {tc.corpus.name} holds no documents")

    def cycles() -> Iterator[list[int]]:
        cycle = 0
        while True:
            order = list(range(len(tc.doc_tokens)))
            rng("haystack-order", tc.corpus.name, cycle, *coords).shuffle(order)
            yield order
            cycle += 1

    return _gather(tc, cycles(), min_tokens)


def build_ordered_haystack(tc: TokenizedCorpus, order: Sequence[int], min_tokens: int) -> Haystack:
    """Concatenate documents in the given ``order`` until ``min_tokens``, starting the order again if short.

    OpenCompass stops at the end of its document list, so a 1000k English prompt comes out short; going
    round the same order again is the smallest change that keeps the promised length.

    Args:
        tc: the tokenized corpus.
        order: document indices in the order they are joined.
        min_tokens: stop once at least this many tokens are gathered (whole documents only).

    Raises:
        ConfigError: the corpus holds no documents.
    """
    if not tc.doc_tokens or not order:
        raise ConfigError(f"corpus {tc.corpus.name} holds no documents")
    return _gather(tc, itertools.repeat(list(order)), min_tokens)


# tokens a haystack keeps past ``min_tokens``: every boundary up to ``min_tokens`` then has the tokens and
# bytes that follow it (its sentence start, stable edge and character tests look one token and one character on)
_LOOKAHEAD = 256


def _gather(tc: TokenizedCorpus, orders: Iterator[list[int]], min_tokens: int) -> Haystack:
    """Join whole documents, order after order, until at least ``min_tokens`` (at least one document).

    The last document is kept only to ``min_tokens + _LOOKAHEAD`` tokens: no prompt cuts a haystack past
    ``min_tokens`` (the longest length asks for it, a budget never exceeds its length), and everything up
    to there is what the whole document gives. One English essay of OpenCompass's file runs to 400k
    tokens, so a 128k haystack was 522k tokens to scan, four times what a prompt can use.
    """
    parts_tokens: list[np.ndarray] = []
    parts_bytes: list[bytes] = []
    doc_starts: list[int] = []
    total = 0
    for order in orders:
        for i in order:
            doc_starts.append(total)
            parts_tokens.append(tc.doc_tokens[i])
            parts_bytes.append(tc.doc_bytes[i])
            total += len(tc.doc_tokens[i])
            if total >= min_tokens:
                break
        if total >= min_tokens:
            break
    lengths = token_byte_lengths(tc.encoding)
    over = total - (min_tokens + _LOOKAHEAD)  # the documents before the last hold fewer than min_tokens
    if over > 0:  # the last document, cut to the look-ahead (its bytes to the same token)
        kept = parts_tokens[-1][: len(parts_tokens[-1]) - over]
        parts_tokens[-1] = kept
        parts_bytes[-1] = parts_bytes[-1][: int(lengths[kept].sum())]
    tokens = np.concatenate(parts_tokens)
    data = b"".join(parts_bytes)
    tok_end = np.cumsum(lengths[tokens])
    ends_sentence, trailing_ws, leading_ws, ends_alnum, starts_other = _token_tables(tc.encoding)
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
    # cl100k never joins a letter or digit to a following space or punctuation mark
    stable = np.flatnonzero(ends_alnum[tokens[:-1]] & starts_other[tokens[1:]]) + 1
    joins = np.asarray(doc_starts[1:] if not tc.separator else [], dtype=np.int64)
    return Haystack(tc.corpus.name, tc.corpus.lang, data, tok_end, starts, char_start, tokens, stable, joins)


@dataclass(frozen=True)
class Placement:
    """Where one inserted text went."""

    requested_depth: float
    token_index: int  # haystack tokens before it
    realised_depth: float


@dataclass(frozen=True)
class FittedPrompt:
    """A prompt fitted to its budget: its UTF-8 bytes, token count, haystack tokens used and where each
    needle went. The text is decoded only when asked for (``text``): the cache stores the bytes."""

    utf8: bytes  # valid UTF-8, always
    tokens: int
    haystack_tokens: int
    budget: int
    placements: tuple[Placement, ...]
    digest: str  # content digest of the assembled bytes, for sample ids

    @property
    def text(self) -> str:
        """The prompt as text."""
        return self.utf8.decode("utf-8")


def _fitted(
    data: bytes,
    count: int,
    cut: int,
    budget: int,
    placements: list[Placement],
    whole_chars: bool,
    replace: bool = False,
) -> FittedPrompt:
    """A ``FittedPrompt`` of assembled bytes.

    ``whole_chars``: every cut of the haystack (the needles' places and its end) fell between characters,
    so the bytes, pieces of valid UTF-8 joined, are valid UTF-8 and need no decoding here. Otherwise they are
    decoded: with ``replace`` (OpenCompass's exact token cuts) a cut inside a multi-byte character becomes
    U+FFFD as ``tiktoken``'s ``decode`` makes it, and ``utf8`` is then that text's own encoding; the digest
    stays the assembled bytes' (as the ids always had it); without, it raises.
    """
    utf8 = data
    if not whole_chars:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            if not replace:
                raise
            utf8 = data.decode("utf-8", errors="replace").encode("utf-8")
    return FittedPrompt(utf8, count, cut, budget, tuple(placements), content_digest(data))


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
    """The sentence start nearest ``target`` tokens, within the cut haystack; depth 100 is its very end."""
    if target >= cut:
        return cut
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


def snap_to_sentence(hay: Haystack, k: int, cut: int) -> int:
    """The sentence start nearest token index ``k`` within the cut haystack (the ``needle_position="sentence"``
    option on OpenCompass's haystack).

    Args:
        hay: the haystack.
        k: the requested token index.
        cut: haystack tokens kept.
    """
    return _snap(hay, float(k), cut)


def _needle_bytes(hay: Haystack, offset: int, end: int, text: str) -> bytes:
    """Join a needle to its neighbours the way prose would (space rules differ by language).

    A needle given on a line of its own (``"\\n...\\n"``, OpenCompass's form) goes in verbatim.
    """
    if text.startswith("\n"):
        return text.encode()
    if hay.lang == "zh":
        # at the very end (depth 100) the cut may fall inside a sentence: start the needle on its own line
        cut_inside = offset == end and offset > 0 and hay.data[offset - 1 : offset] != b"\n"
        return ("\n" + text if cut_inside else text).encode()
    before = hay.data[offset - 1 : offset] if offset > 0 else b"\n"
    after = hay.data[offset : offset + 1] if offset < end else b"\n"
    if before.isspace():
        return (text + ("" if after.isspace() else " ")).encode()
    return (" " + text).encode()


def _edges(hay: Haystack, ks: list[int], cut: int) -> tuple[list[int], list[int]]:
    """Each insertion point's interval edges at once: the nearest stable boundary strictly below ``k``
    (0 for ``k <= 1`` or none) and strictly above it (``cut`` for ``k >= cut - 1`` or none below ``cut``),
    in two array searches for the whole prompt."""
    points = np.asarray(ks, dtype=np.int64)
    stable = hay.stable
    if not len(stable):
        return [0] * len(ks), [cut] * len(ks)
    i = np.searchsorted(stable, points - 1, side="right") - 1
    below = stable[np.maximum(i, 0)]
    lo = np.where((i >= 0) & (below > 0) & (points > 1), below, 0)
    j = np.searchsorted(stable, points + 1, side="left")
    above = stable[np.minimum(j, len(stable) - 1)]
    hi = np.where((j < len(stable)) & (above < cut) & (points < cut - 1), above, cut)
    return lo.tolist(), hi.tolist()


def _interval_tokens(enc, hay: Haystack, lo: int, hi: int, inserts: list[tuple[int, bytes]]) -> int:
    """Tokens of haystack[lo:hi] with ``inserts`` (byte offset, bytes) applied, in place in the prompt.

    ``lo`` is 0 or a stable boundary and ``hi`` is ``cut`` or a stable boundary, so the
    interval encodes the same alone as inside the prompt. Memoised on the haystack (``interval_memo``).
    """
    key = (enc.name, lo, hi, tuple(inserts))
    known = hay.interval_memo.get(key)
    if known is not None:
        return known
    a, b = hay.offset(lo), hay.offset(hi)
    pieces = []
    cursor = a
    for off, ins in inserts:
        pieces.append(hay.data[cursor:off])
        pieces.append(ins)
        cursor = off
    pieces.append(hay.data[cursor:b])
    count = len(enc.encode_ordinary(b"".join(pieces).decode("utf-8", errors="replace")))
    hay.interval_memo[key] = count
    return count


def _assemble(
    hay: Haystack,
    cut: int,
    head: str,
    tail: str,
    needles: Sequence[tuple[float, str]],
    enc,
    at: Sequence[int] | None = None,
) -> tuple[bytes, int, list[Placement], bool]:
    """The prompt's bytes, its token count, the placements and whether every cut of the haystack fell
    between characters; needles go to ``at`` (token indices) if given, else to the sentence start nearest
    their depth. Needles at the same index keep their given order."""
    end_offset = hay.offset(cut)
    placements = []
    inserts: list[tuple[int, int, bytes]] = []  # (token index, order, bytes)
    for order, (depth, text) in enumerate(needles):
        k = _snap(hay, depth / 100.0 * cut, cut) if at is None else at[order]
        off = hay.offset(k)
        realised = 100.0 * k / cut if cut else 0.0
        placements.append(Placement(float(depth), k, round(realised, 3)))
        inserts.append((k, order, _needle_bytes(hay, off, end_offset, text)))
    inserts.sort(key=lambda x: (x[0], x[1]))
    # re-encoded where documents touch (the joins strictly inside the cut)
    inside = hay.joins[np.searchsorted(hay.joins, 0, side="right") : np.searchsorted(hay.joins, cut, side="left")]
    joins = [(k, -2, b"") for k in inside.tolist()]
    all_inserts = [(0, -1, head.encode())] + sorted(inserts + joins) + [(cut, 1 << 30, tail.encode())]
    # each insertion gets an interval with stable edges; overlapping intervals merge;
    # an interval's tokens replace its haystack tokens in the count
    intervals: list[list] = []
    points = [k for k, _, _ in all_inserts]
    # edges strictly outside the insertion point, so original text borders each edge
    los, his = _edges(hay, points, cut)
    for (k, _, b), lo, hi in zip(all_inserts, los, his, strict=True):
        if intervals and lo <= intervals[-1][1]:
            intervals[-1][1] = max(intervals[-1][1], hi)
            intervals[-1][2].append((hay.offset(k), b))
        else:
            intervals.append([lo, hi, [(hay.offset(k), b)]])
    count = cut
    for lo, hi, items in intervals:
        count += _interval_tokens(enc, hay, lo, hi, items) - (hi - lo)
    data = memoryview(hay.data)  # slices of a view are not copies: the prompt's bytes are copied once, by the join
    pieces: list = [head.encode()]
    cursor = 0
    for k, _, b in inserts:
        off = hay.offset(k)
        pieces.append(data[cursor:off])
        pieces.append(b)
        cursor = off
    pieces.append(data[cursor:end_offset])
    pieces.append(tail.encode())
    whole_chars = bool(hay.char_start[cut]) and all(hay.char_start[k] for k, _, _ in inserts)
    return b"".join(pieces), count, placements, whole_chars


def place_at(
    hay: Haystack,
    cut: int,
    head: str,
    tail: str,
    needles: Sequence[tuple[float, str]],
    at: Sequence[int],
    encoding: str = "cl100k_base",
) -> FittedPrompt:
    """``head + haystack[:cut]-with-needles + tail`` with each needle at a given token index, nothing fitted.

    OpenCompass's way: the cut and the insertion points are token counts decided beforehand, and the
    token list is decoded as a whole, so a cut inside a multi-byte character decodes to U+FFFD exactly as
    ``tiktoken``'s ``decode`` does (``errors="replace"``).

    Args:
        hay: the repeat's haystack.
        cut: haystack tokens kept.
        head: text before the haystack.
        tail: text after the haystack.
        needles: (requested depth in percent, text) of every needle, in insertion order.
        at: each needle's token index in the cut haystack (0..cut).
        encoding: tiktoken encoding name.
    """
    enc = get_encoding(encoding)
    cut = max(0, min(cut, hay.n_tokens))
    data, count, placements, whole_chars = _assemble(hay, cut, head, tail, needles, enc, at)
    return _fitted(data, count, cut, count, placements, whole_chars, replace=True)


def text_tokens(head: str, tail: str, needles: Sequence[tuple[float, str]], encoding: str = "cl100k_base") -> int:
    """Tokens of everything but the filler (one spare token per needle for its joining space).

    Args:
        head: text before the haystack.
        tail: text after the haystack.
        needles: (depth in percent, text) of every needle.
        encoding: tiktoken encoding name.
    """
    total = count_tokens(head, encoding) + count_tokens(tail, encoding)
    return total + sum(count_tokens(t, encoding) + 1 for _, t in needles)


def fit_prompt(
    hay: Haystack,
    budget: int,
    head: str,
    tail: str,
    needles: Sequence[tuple[float, str]],
    encoding: str = "cl100k_base",
    overhead: int | None = None,
) -> FittedPrompt:
    """Fill ``head + haystack-with-needles + tail`` to at most ``budget`` tokens, as close as possible.

    The search is bounded and consumes no randomness: it lowers the haystack
    size by the measured excess until the prompt fits.

    Args:
        hay: the repeat's haystack; its first tokens become the filler.
        budget: the most tokens the whole prompt may take.
        head: text before the haystack.
        tail: text after the haystack.
        needles: (depth in percent, text) of every needle; each goes to the sentence start nearest its depth.
        encoding: tiktoken encoding name.
        overhead: tokens of everything but the filler, if the caller knows it (default: :func:`text_tokens`).

    Raises:
        ConfigError: the budget leaves no room for filler, or the haystack is too short for it.
    """
    enc = get_encoding(encoding)
    if overhead is None:
        overhead = text_tokens(head, tail, needles, encoding)
    h = budget - overhead
    if h <= 0:
        raise ConfigError(f"length budget {budget} tokens leaves no room for filler (needs {overhead} for the text)")
    if h > hay.n_tokens:
        raise ConfigError(f"haystack has {hay.n_tokens} tokens, {h} needed")
    for _ in range(8):
        cut = _cut(hay, h)
        data, count, placements, whole_chars = _assemble(hay, cut, head, tail, needles, enc)
        if count <= budget:
            return _fitted(data, count, cut, budget, placements, whole_chars)
        h -= count - budget
    raise ConfigError(f"could not fit the prompt into {budget} tokens")  # pragma: no cover
