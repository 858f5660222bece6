"""Optional query rewriting before a search: a terse or odd query becomes a clear question.

Off by default. A rewriter is pluggable (anything with ``name`` and ``async rewrite``); the one
that ships uses Cohere's chat model when a Cohere key is configured. A rewrite that fails or
comes back empty is not an error for the caller: the original query is searched, and the reply's
``query`` says which text was searched.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from kbus_runtime.settings import CohereSettings

log = logging.getLogger("kbus.searcher")

INSTRUCTION = (
    "Rewrite the user's search query as one clear, self-contained question or statement for a "
    "search engine over a document collection. Keep every name, number, code and technical term "
    "exactly as written; do not answer it; do not add facts. Reply with the rewritten query only."
    "\nExample: 'location of food' -> 'Where is the food located?'"
)
MAX_REWRITE_CHARS = 1_000


class QueryRewriter(Protocol):
    """Turns a query into the text to search with."""

    name: str

    async def rewrite(self, query: str) -> str: ...


class CohereRewriter:
    """Rewrites with a Cohere chat model."""

    def __init__(self, settings: CohereSettings) -> None:
        import cohere

        self.client = cohere.AsyncClientV2(**settings.client_options("the Cohere query rewriter"))
        self.model = settings.chat_model
        self.name = f"cohere/{settings.chat_model}"

    async def rewrite(self, query: str) -> str:
        from cohere import SystemChatMessageV2, UserChatMessageV2

        response = await self.client.chat(
            model=self.model,
            messages=[
                SystemChatMessageV2(content=INSTRUCTION),
                UserChatMessageV2(content=query),
            ],
            temperature=0.0,
        )
        parts = response.message.content or []
        return "".join(getattr(p, "text", "") for p in parts).strip()


async def rewrite_or_none(rewriter: QueryRewriter, query: str, timeout_s: float) -> str | None:
    """The rewritten query; None when rewriting fails, takes longer than ``timeout_s`` or
    returns nothing usable (the search then runs on the query as given)."""
    try:
        async with asyncio.timeout(timeout_s):
            text = (await rewriter.rewrite(query)).strip().strip('"').strip()
    except Exception as exc:  # a rewrite is an improvement, never a reason to fail a search
        log.warning(
            "query rewriting failed (%s: %s); searching the query as given", type(exc).__name__, exc
        )
        return None
    if not text or len(text) > MAX_REWRITE_CHARS:
        return None
    return text


def create_rewriter(kind: str, cohere: CohereSettings) -> QueryRewriter | None:
    """The configured rewriter (``none`` or ``cohere``)."""
    if kind == "none":
        return None
    if kind == "cohere":
        return CohereRewriter(cohere)
    raise ValueError(f"unknown query rewriter {kind!r}")
