"""Filling a token budget with passages, in rank order.

Hits of one document whose regions touch or overlap become one passage (at the rank of the
best), text already given (in this reply, or before it by the cursor) is never given again, and
what does not fit is cut at a sentence boundary (a word boundary when the budget ends inside a
sentence longer than what is left). Offsets are the document's: every piece of a passage is the
document's text between its offsets.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from kbus_contract import CutReason, SearchHit

Interval = tuple[int, int]
#: (library, document id, version): one version of one document.
DocKey = tuple[str, str, str]
Count = Callable[[str], int]
#: A text's tokens as the offsets where each starts and ends (one tokenization of a long text
#: answers how many tokens any head or tail of it holds).
Offsets = Callable[[str], tuple[list[int], list[int]]]

SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s)|\n")
_WORD_END = re.compile(r"\S(?=\s)")
#: A token for the line break that joins two pieces of one passage.
_JOIN_TOKENS = 1
#: The least of a long region tokenized to decide what of it fits, and the characters per
#: token of what is left it starts from (a window then holding too few tokens is widened).
WINDOW_CHARS, WINDOW_CHARS_PER_TOKEN = 4096, 5


@dataclass(frozen=True)
class Block:
    """A chunk as a passage reads it."""

    position: int
    char_start: int
    char_end: int
    text: str
    heading_path: tuple[str, ...] = ()
    page: int | None = None


def key_of(hit: SearchHit) -> DocKey:
    """The document version a hit belongs to."""
    return hit.library, hit.document_id, hit.version


def block_of(hit: SearchHit) -> Block:
    """A hit's own chunk as a block."""
    return Block(hit.position, hit.char_start, hit.char_end, hit.text, hit.heading_path, hit.page)


def runs(blocks: Iterable[Block]) -> list[Interval]:
    """The spans blocks cover, those that overlap or touch joined."""
    return merged((b.char_start, b.char_end) for b in blocks)


def merged(intervals: Iterable[Interval]) -> list[Interval]:
    """Intervals in order, those that overlap or touch joined."""
    out: list[Interval] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def subtract(intervals: Iterable[Interval], taken: Iterable[Interval]) -> list[Interval]:
    """What of ``intervals`` lies outside every interval of ``taken``."""
    left = list(intervals)
    for ta, tb in taken:
        cut: list[Interval] = []
        for a, b in left:
            if tb <= a or ta >= b:
                cut.append((a, b))
                continue
            if a < ta:
                cut.append((a, ta))
            if tb < b:
                cut.append((tb, b))
        left = cut
    return [(a, b) for a, b in left if b > a]


def text_of(blocks: Sequence[Block], span: Interval) -> str:
    """The document's text in ``span``, read from blocks that cover it."""
    a, b = span
    if b <= a:
        return ""
    parts, at = [], a
    for blk in sorted(blocks, key=lambda x: x.char_start):
        if blk.char_start <= at < blk.char_end:
            end = min(b, blk.char_end)
            parts.append(blk.text[at - blk.char_start : end - blk.char_start])
            at = end
        if at >= b:
            return "".join(parts)
    raise ValueError(f"no block holds the text at {at} of {span}")


def cut(
    text: str,
    allowance: int,
    keep_head: bool,
    count: Count,
    words: bool = False,
    offsets: Offsets | None = None,
) -> tuple[int, int, CutReason]:
    """The offsets (within ``text``) of the most of it that fits in ``allowance`` tokens, cut
    at a sentence boundary (with ``words``, else at a word boundary): its head, or its tail
    when not ``keep_head``. (0, 0, ...) when nothing fits. With ``offsets``, ``text`` is
    tokenized once and every head and tail counted from it (a head ends, a tail starts, at a
    boundary between words, where a tokenizer splits the same alone or in the whole)."""
    head, tail = _counters(text, count, offsets)
    patterns = [(SENTENCE_END, CutReason.BUDGET)] + ([(_WORD_END, CutReason.WORD)] if words else [])
    for pattern, reason in patterns:
        if keep_head:
            ends = [m.end() for m in pattern.finditer(text)]
            fits = _last_fitting(ends, lambda e: head(len(text[:e].rstrip())) <= allowance)
            if fits is not None:
                return 0, len(text[:fits].rstrip()), reason
        else:
            starts = [len(text) - len(text[m.end() :].lstrip()) for m in pattern.finditer(text)]
            starts = [s for s in starts if s < len(text)]
            fits = _first_fitting(starts, lambda s: tail(s) <= allowance)
            if fits is not None:
                return fits, len(text), reason
    return 0, 0, patterns[-1][1]


def _given(offsets: tuple[list[int], list[int]], _: str) -> tuple[list[int], list[int]]:
    return offsets


def _counters(
    text: str, count: Count, offsets: Offsets | None
) -> tuple[Callable[[int], int], Callable[[int], int]]:
    """The tokens of ``text[:end]`` and of ``text[start:]``."""
    if offsets is None:
        return (lambda end: count(text[:end])), (lambda start: count(text[start:]))
    starts, ends = offsets(text)
    return (
        lambda end: bisect.bisect_right(ends, end),
        lambda start: len(starts) - bisect.bisect_left(starts, start),
    )


def _last_fitting(bounds: list[int], fits: Callable[[int], bool]) -> int | None:
    """The largest bound that fits (fitting shrinks as a bound grows)."""
    lo, hi = 0, len(bounds)
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(bounds[mid]):
            lo = mid + 1
        else:
            hi = mid
    return bounds[lo - 1] if lo else None


def _first_fitting(bounds: list[int], fits: Callable[[int], bool]) -> int | None:
    """The smallest bound that fits (fitting grows with the bound)."""
    lo, hi = 0, len(bounds)
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(bounds[mid]):
            hi = mid
        else:
            lo = mid + 1
    return bounds[lo] if lo < len(bounds) else None


@dataclass
class Draft:
    """A passage being filled."""

    key: DocKey
    rank: int
    first: SearchHit
    hits: list[SearchHit]
    intervals: list[Interval] = field(default_factory=list)
    positions: set[int] = field(default_factory=set)
    tokens: int = 0
    cut: CutReason | None = None


class Packer:
    """Takes seeds (a hit and the blocks its expansion reaches) in rank order while the budget
    lasts; ``taken`` is what was given before (the cursor's) and grows with what is given."""

    def __init__(
        self,
        count: Count,
        budget: int,
        taken: dict[DocKey, list[Interval]],
        offsets: Offsets | None = None,
    ) -> None:
        self.count = count
        self.offsets = offsets
        self.budget = budget
        self.taken = taken
        self.used = 0
        self.full = False
        self.drafts: list[Draft] = []
        self.blocks: dict[DocKey, dict[int, Block]] = {}

    def add(self, hit: SearchHit, region: Sequence[Block]) -> None:
        """Give what the hit's region adds, merged into a passage it touches, or as a new one;
        sets ``full`` once the budget is spent."""
        key = key_of(hit)
        known = self.blocks.setdefault(key, {})
        known.update((b.position, b) for b in (*region, block_of(hit)))
        fresh = subtract(_split(runs(region), hit.char_start), self.taken.get(key, []))
        draft = self._touching(key, {b.position for b in region} | {hit.position})
        if draft is not None and all(h.chunk_id != hit.chunk_id for h in draft.hits):
            draft.hits.append(hit)
        chosen, reason = self._fit(key, sorted(fresh, key=lambda iv: _nearness(iv, hit)), hit)
        if not chosen:
            return
        if draft is None:
            draft = Draft(key, len(self.drafts) + 1, hit, [hit])
            self.drafts.append(draft)
        draft.intervals = sorted(draft.intervals + chosen)
        draft.positions |= {p for p, b in known.items() if _overlaps(b, chosen)}
        draft.cut = draft.cut or reason
        self.taken.setdefault(key, []).extend(chosen)

    def text(self, draft: Draft) -> tuple[str, list[Interval]]:
        """A draft's text and its pieces (intervals that touch are one piece)."""
        blocks = list(self.blocks[draft.key].values())
        pieces: list[Interval] = []
        for a, b in merged(draft.intervals):
            if pieces and _blank_between(blocks, pieces[-1][1], a):
                pieces[-1] = (pieces[-1][0], b)
            else:
                pieces.append((a, b))
        return "\n".join(text_of(blocks, p) for p in pieces), pieces

    def _fit(
        self, key: DocKey, fresh: list[Interval], hit: SearchHit
    ) -> tuple[list[Interval], CutReason | None]:
        """The fresh intervals that fit, nearest the hit first; the first that does not fit is
        cut, and the budget is then spent."""
        blocks = list(self.blocks[key].values())
        chosen: list[Interval] = []
        for a, b in (_trimmed(blocks, iv) for iv in fresh):
            if b <= a:
                continue
            left = self.budget - self.used - _JOIN_TOKENS
            keep_head = a >= hit.char_start
            text, shift, known = self._measured(text_of(blocks, (a, b)), left, keep_head)
            tokens = len(known[0]) if known is not None else self.count(text)
            if tokens <= left:
                chosen.append((a, b))
                self.used += tokens + _JOIN_TOKENS
                continue
            self.full = True
            # Only the hit itself is cut inside a sentence: context is cut at sentences.
            holds_hit = hit.char_start <= a < hit.char_end
            start, end, reason = cut(
                text,
                left,
                keep_head,
                self.count,
                holds_hit,
                None if known is None else functools.partial(_given, known),
            )
            if end > start:
                chosen.append((a + shift + start, a + shift + end))
                self.used += self._tokens(text, start, end, known) + _JOIN_TOKENS
            return chosen, reason
        return chosen, None

    def _tokens(
        self, text: str, start: int, end: int, known: tuple[list[int], list[int]] | None
    ) -> int:
        """The tokens of ``text[start:end]`` (a head or a tail of it), from its offsets where
        they are known."""
        if known is None:
            return self.count(text[start:end])
        starts, ends = known
        return bisect.bisect_right(ends, end) - bisect.bisect_left(starts, start)

    def _measured(
        self, text: str, left: int, keep_head: bool
    ) -> tuple[str, int, tuple[list[int], list[int]] | None]:
        """The part of ``text`` its fit is decided on, where it starts in ``text``, and its
        tokens: all of it when it fits in ``left`` tokens, else a head (or with ``keep_head``
        off, a tail) already holding more than ``left``, in which the cut falls as it would
        in the whole (a long region is never tokenized whole for a budget's last tokens)."""
        if self.offsets is None:
            return text, 0, None
        size = max(WINDOW_CHARS, left * WINDOW_CHARS_PER_TOKEN)
        while True:
            if size >= len(text):
                return text, 0, self.offsets(text)
            window = text[:size] if keep_head else text[-size:]
            known = self.offsets(window)
            if len(known[0]) > left + 1:
                return window, 0 if keep_head else len(text) - size, known
            size *= 2

    def _touching(self, key: DocKey, positions: set[int]) -> Draft | None:
        near = {p + d for p in positions for d in (-1, 0, 1)}
        return next((d for d in self.drafts if d.key == key and d.positions & near), None)


def _blank_between(blocks: Sequence[Block], a: int, b: int) -> bool:
    """Whether the document's text from ``a`` to ``b`` is known and only white space."""
    try:
        return not text_of(blocks, (a, b)).strip()
    except ValueError:
        return False


def _trimmed(blocks: Sequence[Block], interval: Interval) -> Interval:
    """An interval without the white space at its ends."""
    a, b = interval
    text = text_of(blocks, interval) if b > a else ""
    return a + len(text) - len(text.lstrip()), b - len(text) + len(text.rstrip())


def _split(intervals: list[Interval], at: int) -> list[Interval]:
    """Intervals with the one holding ``at`` split there (the hit's start)."""
    out: list[Interval] = []
    for a, b in intervals:
        out.extend([(a, at), (at, b)] if a < at < b else [(a, b)])
    return out


def _nearness(interval: Interval, hit: SearchHit) -> tuple[int, int]:
    """Order of filling: the hit and what follows it, then what precedes, nearest first."""
    a, b = interval
    if a >= hit.char_start:
        return max(0, a - hit.char_end), 0
    return max(0, hit.char_start - b), 1


def _overlaps(block: Block, intervals: list[Interval]) -> bool:
    return any(a < block.char_end and block.char_start < b for a, b in intervals)
