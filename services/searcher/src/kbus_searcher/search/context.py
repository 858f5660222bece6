"""A search's context: passages that fill the caller's token budget, in rank order.

The ranked hits seed passages (up to ``k`` when the request set it; with ``adaptive``, while
their scores stay above a cut relative to the best), each hit's region is read
(:mod:`~kbus_searcher.search.expansion`) and packed (:mod:`~kbus_searcher.search.packing`), and
each passage gets its citation and highlights.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kbus_contract import (
    Citation,
    Context,
    Passage,
    PassageHit,
    SearchHit,
    SearchRequest,
    Span,
)

from kbus_searcher.search import cursors
from kbus_searcher.search.expansion import Expander
from kbus_searcher.search.highlighting import highlights
from kbus_searcher.search.packing import (
    Block,
    DocKey,
    Draft,
    Interval,
    Packer,
    key_of,
    subtract,
    text_of,
)
from kbus_searcher.search.tokens import TokenCounter
from kbus_searcher.store import StoreView

#: Hits whose regions are read at once.
BATCH = 8


def adaptive_cut(scores: Sequence[float], drop: float) -> float:
    """The lowest score an adaptive context keeps: the best less ``drop`` of the spread from
    the best to the last candidate."""
    return scores[0] - drop * (scores[0] - scores[-1])


def _fresh(hits: Sequence[SearchHit], taken: dict[DocKey, list[Interval]]) -> list[SearchHit]:
    """Hits not wholly given already (by the pages before this one)."""
    return [h for h in hits if subtract([(h.char_start, h.char_end)], taken.get(key_of(h), []))]


class ContextBuilder:
    """Makes the context of searches that give ``budget_tokens``."""

    def __init__(self, counter: TokenCounter, adaptive_drop: float) -> None:
        self.counter = counter
        self.adaptive_drop = adaptive_drop

    async def build(
        self, req: SearchRequest, query: str, ranked: Sequence[SearchHit], view: StoreView
    ) -> Context:
        """The context of a search whose hits, best first, are ``ranked``, read through the
        caller's ``view``."""
        assert req.budget_tokens is not None
        taken = cursors.decode(req)
        seeds, why = self._seeds(req, _fresh(ranked, taken))
        packer = Packer(self.counter.count, req.budget_tokens, taken, self.counter.offsets)
        expander = Expander(view, req.expand, req.budget_tokens)
        # Counting and cutting a context is a search's CPU work: off the event loop, so that
        # other searches go on meanwhile (at the same priority: a thread of lower priority
        # holding the interpreter's lock would hold them up instead).
        for start in range(0, len(seeds), BATCH):
            batch = seeds[start : start + BATCH]
            regions = await expander.regions(batch)
            await asyncio.to_thread(_pack, packer, batch, regions)
            if packer.full:
                why = f"budget: {packer.used} of {req.budget_tokens} tokens used; more remain"
                break
        passages = await asyncio.to_thread(self._passages, req, query, packer)
        more = packer.full or why.startswith("k:")
        return Context(
            passages=passages,
            tokenizer=self.counter.name,
            budget_tokens=req.budget_tokens,
            used_tokens=sum(p.tokens for p in passages),
            expand=req.expand,
            adaptive=req.adaptive,
            cut=why,
            cursor=cursors.encode(req, packer.taken) if more and passages else None,
        )

    def _seeds(self, req: SearchRequest, hits: list[SearchHit]) -> tuple[list[SearchHit], str]:
        """The hits that seed passages, and why they end where they do."""
        if req.adaptive and hits:
            scores = [h.scores.final for h in hits]
            floor = adaptive_cut(scores, self.adaptive_drop)
            kept = [h for h in hits if h.scores.final >= floor]
            return kept, (
                f"adaptive: hits scoring at least {floor:.4f}, the best {scores[0]:.4f} less "
                f"{self.adaptive_drop:g} of the spread to the last candidate's "
                f"{scores[-1]:.4f}; {len(kept)} of {len(hits)} hits above it"
            )
        if req.k is not None and len(hits) > req.k:
            return hits[: req.k], f"k: the best {req.k} of {len(hits)} hits"
        return hits, f"candidates: all {len(hits)} hits left given"

    def _passages(self, req: SearchRequest, query: str, packer: Packer) -> tuple[Passage, ...]:
        passages: list[Passage] = []
        used = 0
        for draft in packer.drafts:
            passage = self._passage(req, query, packer, draft)
            used += passage.tokens
            if used > packer.budget:
                break  # never past the budget, whatever the tokenizer does at the joins
            passages.append(passage)
        return tuple(passages)

    def _passage(self, req: SearchRequest, query: str, packer: Packer, draft: Draft) -> Passage:
        text, pieces = packer.text(draft)
        blocks = sorted(packer.blocks[draft.key].values(), key=lambda b: b.char_start)
        held = [b for b in blocks if b.position in draft.positions]
        first = draft.first
        texts = [(p, text_of(blocks, p)) for p in pieces]
        return Passage(
            rank=draft.rank,
            text=text,
            tokens=self.counter.count(text),
            score=first.scores.final,
            hits=tuple(
                PassageHit(
                    chunk_id=h.chunk_id,
                    char_start=h.char_start,
                    char_end=h.char_end,
                    score=h.scores.final,
                )
                for h in draft.hits
            ),
            expand=req.expand,
            citation=Citation(
                document_id=first.document_id,
                library=first.library,
                title=first.title,
                source_uri=first.source_uri,
                version=first.version,
                heading_path=first.heading_path,
                pages=tuple(sorted({b.page for b in held if b.page is not None})),
                spans=tuple(_span(blocks, a, b) for a, b in pieces),
            ),
            highlights=highlights(query, texts),
            cut=draft.cut,
        )


def _pack(packer: Packer, hits: Sequence[SearchHit], regions: Sequence[Sequence[Block]]) -> None:
    for hit, region in zip(hits, regions, strict=True):
        packer.add(hit, region)
        if packer.full:
            return


def _span(blocks: Sequence[Block], start: int, end: int) -> Span:
    """A piece's span, with the page and section of the chunk it begins in."""
    at = next(b for b in blocks if b.char_start <= start < b.char_end)
    return Span(char_start=start, char_end=end, page=at.page, heading_path=at.heading_path)
