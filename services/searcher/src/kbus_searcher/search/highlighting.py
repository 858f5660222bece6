"""Highlights: the sentences of a passage that hold most of the query's keywords."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence

from kbus_contract import Highlight
from kbus_runtime.analysis import content_terms

from kbus_searcher.search.packing import Interval

#: Highlights per passage.
MOST = 3
#: A sentence's end: its punctuation, before white space.
_PUNCTUATION = re.compile(r"[.!?][\"')\]]*(?=\s)")
#: A line that stands on its own: a heading, a list item, a quote or a table row.
_BLOCK = re.compile(r"[ \t]*(?:[-*+#>|]|\d+[.)])\s")


def _ends(text: str) -> list[int]:
    """Where the sentences of ``text`` end: at their punctuation, and at a line break unless
    it only wraps a paragraph (a prose line followed by another)."""
    ends = {m.end() for m in _PUNCTUATION.finditer(text)}
    lines = text.split("\n")
    at = 0
    for line, following in itertools.pairwise(lines):
        at += len(line) + 1
        prose = line.strip() and following.strip()
        if not prose or _BLOCK.match(line) or _BLOCK.match(following):
            ends.add(at)
    ends.add(len(text))
    return sorted(ends)


def sentences(text: str) -> Iterator[Interval]:
    """The spans of ``text``'s sentences, without the white space around them (a line break
    inside a paragraph, as in hard-wrapped text, does not end one)."""
    start = 0
    for end in _ends(text):
        piece = text[start:end]
        lead = len(piece) - len(piece.lstrip())
        body = piece.strip()
        if body:
            yield start + lead, start + lead + len(body)
        start = end


def highlights(query: str, pieces: Sequence[tuple[Interval, str]]) -> tuple[Highlight, ...]:
    """The sentences (in the document's offsets) holding the largest share of the query's
    keywords, best first; none when the query has no keyword or no sentence holds one."""
    wanted = content_terms(query)
    if not wanted:
        return ()
    found: list[Highlight] = []
    for (offset, _), text in pieces:
        for a, b in sentences(text):
            held = content_terms(text[a:b]) & wanted
            if held:
                found.append(
                    Highlight(
                        char_start=offset + a,
                        char_end=offset + b,
                        score=round(len(held) / len(wanted), 4),
                        terms=tuple(sorted(held)),
                    )
                )
    found.sort(key=lambda h: (-h.score, h.char_start))
    return tuple(found[:MOST])
