"""What a passage holds around each hit: the hit, its neighbours, its section, its document.

The chunks around hits are read from the store in one query per document version, through the
caller's view like the search itself: what it may not read is never read (a restricted chunk an
earlier publish left at a neighbouring position included).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from kbus_contract import Expand, SearchHit

from kbus_searcher.search.packing import Block, DocKey, block_of, key_of
from kbus_searcher.store import StoreView

#: A chunk holds at least this many tokens, as a rule: how far a section or document is read
#: around a hit so that the budget can be filled (a budget of 2,048 tokens reads 130 positions
#: each side).
TOKENS_PER_CHUNK_AT_LEAST = 16


def _block(row: dict[str, Any]) -> Block:
    return Block(
        position=int(row.get("position") or 0),
        char_start=int(row.get("char_start") or 0),
        char_end=int(row.get("char_end") or 0),
        text=str(row.get("text") or ""),
        heading_path=tuple(row.get("heading_path") or ()),
        page=int(row.get("page") or 0) or None,
    )


def _section_of(hit: SearchHit, block: Block) -> bool:
    """Whether ``block`` is in the hit's section: the same heading path; for a hit without
    headings, the same page (or, without pages, the same heading-less text)."""
    if hit.heading_path or hit.page is None:
        return block.heading_path == hit.heading_path
    return not block.heading_path and block.page == hit.page


class Expander:
    """Reads the region each hit's passage may hold."""

    def __init__(self, view: StoreView, expand: Expand, budget: int) -> None:
        self.view = view
        self.expand = expand
        self.reach = 1 if expand is Expand.NEIGHBOURS else budget // TOKENS_PER_CHUNK_AT_LEAST + 2

    async def regions(self, hits: Sequence[SearchHit]) -> list[list[Block]]:
        """Each hit's region: the chunks its passage may hold, in position order."""
        if self.expand is Expand.NONE:
            return [[block_of(h)] for h in hits]
        ranges = self._ranges(hits)
        read = await asyncio.gather(*(self.view.blocks(key, lo, hi) for key, lo, hi in ranges))
        by_key: dict[DocKey, list[Block]] = {}
        for (key, _, _), rows in zip(ranges, read, strict=True):
            by_key.setdefault(key, []).extend(_block(r) for r in rows)
        return [self._region(h, by_key[key_of(h)]) for h in hits]

    def _ranges(self, hits: Sequence[SearchHit]) -> list[tuple[DocKey, int, int]]:
        """The positions to read: one range per document for hits whose reaches meet."""
        ranges: list[tuple[DocKey, int, int]] = []
        for key, p in sorted((key_of(h), h.position) for h in hits):
            lo, hi = max(0, p - self.reach), p + self.reach
            if ranges and ranges[-1][0] == key and lo <= ranges[-1][2] + 1:
                ranges[-1] = (key, ranges[-1][1], hi)
            else:
                ranges.append((key, lo, hi))
        return ranges

    def _region(self, hit: SearchHit, read: list[Block]) -> list[Block]:
        at = {b.position: b for b in read}
        at.setdefault(hit.position, block_of(hit))
        if self.expand is Expand.NEIGHBOURS:
            near = range(hit.position - 1, hit.position + 2)
        elif self.expand is Expand.DOCUMENT:
            near = range(hit.position - self.reach, hit.position + self.reach + 1)
        else:
            return self._section(hit, at)
        return [at[p] for p in near if p in at]

    def _section(self, hit: SearchHit, at: dict[int, Block]) -> list[Block]:
        """The run of chunks around the hit that share its section."""
        first = last = hit.position
        while first - 1 in at and _section_of(hit, at[first - 1]):
            first -= 1
        while last + 1 in at and _section_of(hit, at[last + 1]):
            last += 1
        return [at[p] for p in range(first, last + 1)]
