"""Highlights: the sentences of a passage that hold most of the query's keywords."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from kbus_contract import Highlight
from kbus_runtime.analysis import content_terms

from kbus_searcher.search.packing import SENTENCE_END, Interval

#: Highlights per passage.
MOST = 3


def sentences(text: str) -> Iterator[Interval]:
    """The spans of ``text``'s sentences, without the white space around them."""
    start = 0
    for m in SENTENCE_END.finditer(text + "\n"):
        end = m.end()
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
