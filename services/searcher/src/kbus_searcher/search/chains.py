"""Which chain a search runs: the query transformer and the reranker its libraries' profiles
name, overridden by what the request says.

The searcher follows the profiles bucket (a key-value watch), so a profile set a moment ago
decides the next searches without a round trip per search. A search over several libraries
uses a link of their profiles only where all of them agree on it; else the server's default.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from kbus_contract import (
    LibraryProfile,
    RerankerKind,
    Reranking,
    SearchRequest,
    Transformer,
    TransformerKind,
)
from kbus_contract.errors import ErrorCode, PermanentError

log = logging.getLogger("kbus.searcher")

L = TypeVar("L", Transformer, Reranking)


@dataclass(frozen=True)
class Chain:
    """The transformer and reranker of one search."""

    transformer: TransformerKind = TransformerKind.NONE
    prompt: str | None = None  # the transformer's instruction (kind prompt)
    reranker: RerankerKind = RerankerKind.DEFAULT
    instruction: str | None = None  # the prompted reranker's
    depth: int | None = None  # candidates re-scored (None: the request's or the server's)
    #: Whether the first candidates are re-scored: the request's choice, else the libraries'
    #: (a reranker of kind none), else the server's.
    rerank: bool = True

    @property
    def query_states(self) -> bool:
        """Whether the reranker reads the query's token states (the prompted one reads only
        the text): the embedder then sends them with the query's vector."""
        return self.rerank and not self.instruction


def _common(links: Sequence[L], default: L) -> L:
    """The link every library has, else ``default``."""
    return links[0] if links and all(link == links[0] for link in links) else default


def chain_of(
    req: SearchRequest, profiles: Sequence[LibraryProfile], rewrite: bool, rerank: bool = True
) -> Chain:
    """The chain of ``req`` over libraries with ``profiles`` (``rewrite``: the server turns
    queries into questions when neither the request nor the profiles choose; ``rerank``: the
    server re-scores unless either says no).

    Raises:
        PermanentError: the request asks for the prompt transformer where the libraries do
            not share a prompt.
    """
    transformer = _common([p.transformer for p in profiles], Transformer())
    reranking = _common([p.reranker for p in profiles], Reranking())
    kind = _transformer_kind(req, transformer.kind, rewrite)
    if kind is TransformerKind.PROMPT and transformer.prompt is None:
        raise PermanentError(
            "the request asks for the libraries' own prompt, but their profiles give no common one",
            code=ErrorCode.NO_PROMPT,
        )
    return Chain(
        transformer=kind,
        prompt=transformer.prompt if kind is TransformerKind.PROMPT else None,
        reranker=reranking.kind,
        instruction=reranking.instruction,
        depth=reranking.depth,
        rerank=req.rerank
        if req.rerank is not None
        else rerank and reranking.kind is not RerankerKind.NONE,
    )


def _transformer_kind(
    req: SearchRequest, profiled: TransformerKind | None, rewrite: bool
) -> TransformerKind:
    if req.rewrite is False:
        return TransformerKind.NONE
    kind = req.transformer or profiled
    if kind is None:
        kind = TransformerKind.QUESTION if rewrite else TransformerKind.NONE
    if req.rewrite and kind is TransformerKind.NONE:
        return TransformerKind.QUESTION  # asked to rewrite, and nothing says how
    return kind
