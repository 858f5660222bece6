"""Recursive chunking with exact character offsets.

A chunk ends at the strongest boundary inside its window: a paragraph break, else a line break,
else a sentence end, else a space; a word is cut only when a single word is longer than a chunk.
The next chunk starts about ``overlap`` characters before the previous end, at a word start.
Offsets are code-point indexes, so ``text[chunk.start:chunk.end] == chunk.text`` always holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# Strongest first. Each pattern matches the whitespace a chunk may end before.
_BOUNDARIES: tuple[re.Pattern[str], ...] = (
    re.compile(r"\n[ \t]*\n\s*"),  # paragraph
    re.compile(r"\n\s*"),  # line
    re.compile(r"(?:(?<=[.!?。！？])|(?<=[.!?。！？][\"'”’)\]]))\s+"),  # noqa: RUF001 (sentence end)
    re.compile(r"\s+"),  # word
)


@dataclass(frozen=True)
class Span:
    """A chunk of text and where it stands in the original."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class ChunkingConfig:
    """Sizes in characters."""

    size: int = 512
    overlap: int = 50
    min_fill: float = 0.5

    def __post_init__(self) -> None:
        if self.size < 16:
            raise ValueError("chunk size must be at least 16 characters")
        if not 0 <= self.overlap < self.size // 2:
            raise ValueError("overlap must be at least 0 and less than half the chunk size")
        if not 0 < self.min_fill <= 1:
            raise ValueError("min_fill must be in (0, 1]")


def iter_spans(text: str, lo: int, hi: int, config: ChunkingConfig) -> Iterator[Span]:
    """The chunks of ``text[lo:hi]`` (offsets in ``text``), one at a time: a large document's
    chunks are made as they are sent on, and its text is never copied whole."""
    start = _skip_space(text, lo, hi)
    while start < hi:
        end = _cut(text, start, hi, config)
        stripped_end = _trim_end(text, start, end)
        yield Span(start, stripped_end, text[start:stripped_end])
        if end >= hi or _skip_space(text, end, hi) >= hi:
            return
        start = _next_start(text, start, end, hi, config.overlap)


def _cut(text: str, start: int, hi: int, config: ChunkingConfig) -> int:
    """Where the chunk starting at ``start`` ends (exclusive)."""
    limit = start + config.size
    if limit >= hi:
        return hi
    earliest = start + max(1, int(config.size * config.min_fill))
    for pattern in _BOUNDARIES:
        cut = _last_boundary(pattern, text, earliest, limit, hi)
        if cut is not None:
            return cut
    # Nothing fills the chunk enough: take any boundary at all before cutting through a word.
    for pattern in _BOUNDARIES:
        cut = _last_boundary(pattern, text, start + 1, limit, hi)
        if cut is not None:
            return cut
    return limit


def _last_boundary(pattern: re.Pattern[str], text: str, lo: int, hi: int, end: int) -> int | None:
    """The last position in ``[lo, hi]`` where a boundary of this kind begins (the text
    ending at ``end``)."""
    best = None
    # Look one character past hi so a boundary whose whitespace starts exactly at hi counts.
    for match in pattern.finditer(text, lo, min(end, hi + 1)):
        if lo <= match.start() <= hi:
            best = match.start()
    return best


def _next_start(text: str, start: int, end: int, hi: int, overlap: int) -> int:
    """The start of the next chunk: a word start about ``overlap`` characters before ``end``."""
    if overlap == 0:
        return _skip_space(text, end, hi)
    candidate = max(start + 1, end - overlap)
    # Move forward to the beginning of a word so the overlap never starts mid-word.
    while candidate < end and not (text[candidate - 1].isspace() and not text[candidate].isspace()):
        candidate += 1
    if candidate >= end:
        return _skip_space(text, end, hi)
    return candidate


def _skip_space(text: str, pos: int, hi: int) -> int:
    while pos < hi and text[pos].isspace():
        pos += 1
    return pos


def _trim_end(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end
