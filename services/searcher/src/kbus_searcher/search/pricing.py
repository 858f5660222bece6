"""What a search costs: its work, estimated from the request before it runs and measured from
what it read and scored after (docs/searching.md, "What a search costs").

A search's CPU, over every process it runs through (the searcher, the embedder, the reranker,
Weaviate, NATS), grows with the candidates it fetches (fused, filtered to searchable versions,
ranked), the chunks a context reads around its hits, the query's tokens (embedded, and matched
by keyword search), the context's tokens (counted and packed) and, most of all, the query's
tokens times the context's (each passage is highlighted with the query's words). The
coefficients are fitted to what ``python -m bench.searchcost`` measured for each shape of
search on two cores (docs/performance.md, "What a search costs"); the unit is an ordinary
search (k=5, a short query, reranked at the default depth, no context), which costs 1.

The estimate turns the request into those figures from the server's settings (how many
candidates its k fetches, how far its context may read, its budget of tokens) and decides the
search's turn and whether it fits its tenant's budgets; the measured work corrects both.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbus_contract import Expand, SearchRequest, SearchType, SearchWork

from kbus_searcher.search.relevance import KEYWORD_CANDIDATES
from kbus_searcher.settings import SearcherSettings

#: CPU milliseconds of a search whatever it asks (the bus, parsing, replies, the first query).
PER_SEARCH_MS = 39.5
#: ... per candidate fetched.
PER_CANDIDATE_MS = 0.25
#: ... per other object read (keyword texts, the chunks a context reads).
PER_READ_MS = 0.19
#: ... per query token.
PER_QUERY_TOKEN_MS = 0.34
#: ... per token of context.
PER_CONTEXT_TOKEN_MS = 0.002
#: ... per query token and thousand tokens of context.
PER_HIGHLIGHT_MS = 0.008
#: ... per candidate the reranker scores.
PER_RERANKED_MS = 0.05
#: A query's tokens at most (the embedder's limit).
MAX_QUERY_TOKENS = 256
#: A context's reads for a section or a whole document: at most its budget in chunks of the
#: fewest tokens a chunk holds, as a rule.
TOKENS_PER_CHUNK_AT_LEAST = 16


@dataclass(frozen=True)
class Figures:
    """What a search's work grows with."""

    candidates: float
    read: float
    query_tokens: float
    context_tokens: float = 0.0
    reranked: float = 0.0

    @property
    def ms(self) -> float:
        """The CPU milliseconds these figures take, as fitted."""
        return (
            PER_SEARCH_MS
            + PER_CANDIDATE_MS * self.candidates
            + PER_READ_MS * self.read
            + PER_QUERY_TOKEN_MS * self.query_tokens
            + PER_CONTEXT_TOKEN_MS * self.context_tokens
            + PER_HIGHLIGHT_MS * self.query_tokens * self.context_tokens / 1000.0
            + PER_RERANKED_MS * self.reranked
        )


def query_tokens(query: str) -> int:
    """A query's tokens, as a rule of four characters each."""
    return min(MAX_QUERY_TOKENS, 2 + len(query) // 4)


#: An ordinary search: 20 candidates, 3 keyword texts, 5 reranked, a query of 40 characters.
ORDINARY = Figures(20, KEYWORD_CANDIDATES, query_tokens("x" * 40), reranked=5)


def work_of(figures: Figures) -> float:
    """Work in units of an ordinary search."""
    return round(figures.ms / ORDINARY.ms, 3)


class Pricing:
    """Estimates a search's work from its request, and says what it measured."""

    def __init__(self, settings: SearcherSettings) -> None:
        self.settings = settings

    def estimate(self, req: SearchRequest) -> float:
        """The work of ``req`` before it runs."""
        k = req.k or self.settings.k
        factor = self.settings.overfetch_factor * (2 if req.group_by_document else 1)
        candidates = max(self.settings.overfetch_min, factor * k)
        reranked = 0 if req.rerank is False else min(candidates, self._depth(req))
        tokens = query_tokens(req.query)
        if req.search_type is SearchType.KEYWORD:
            tokens = max(1, tokens // 4)  # analysed, never embedded
        read = KEYWORD_CANDIDATES + self._context_reads(req, k)
        return work_of(Figures(candidates, read, tokens, req.budget_tokens or 0, reranked))

    @staticmethod
    def measured(
        estimate: float, candidates: int, read: int, context_tokens: int, reranked: int, query: str
    ) -> SearchWork:
        """What a search that ran cost: from the candidates it fetched, the other objects it
        read, the context it packed and the candidates scored."""
        tokens = query_tokens(query)
        figures = Figures(candidates, read - candidates, tokens, context_tokens, reranked)
        return SearchWork(
            estimate=estimate,
            measured=work_of(figures),
            read=read,
            reranked=reranked,
            query_tokens=tokens,
        )

    def _depth(self, req: SearchRequest) -> int:
        return req.rerank_depth or self.settings.rerank_depth

    @staticmethod
    def _context_reads(req: SearchRequest, k: int) -> float:
        """The chunks a context may read around its hits, at most."""
        if req.budget_tokens is None or req.expand is Expand.NONE:
            return 0.0
        if req.expand is Expand.NEIGHBOURS:
            return 3.0 * k
        return req.budget_tokens / TOKENS_PER_CHUNK_AT_LEAST
