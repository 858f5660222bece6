"""Optional query rewriting before a search: a terse or odd query becomes a clear question.

Off by default. A rewriter is pluggable (anything with ``name`` and ``async rewrite``); the one
that ships prompts a chat model: Cohere's, or any OpenAI-compatible endpoint such as the local
llama.cpp server devtools starts. A rewrite that fails, is slow, or comes back in another form
than one query is not an error for the caller: the original query is searched, the reply's
``query`` says which text was searched and ``transformer`` which rewriter produced it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Protocol

from kbus_runtime.analysis import content_terms
from kbus_runtime.chat import ChatBackend, ChatModel, LLMSettings, create_chat
from kbus_runtime.settings import CohereSettings

log = logging.getLogger("kbus.searcher")

INSTRUCTION = (
    "Rewrite the user's search query as one clear, self-contained question or statement for a "
    "search engine over a document collection. Keep every name, number, code and technical term "
    "exactly as written; do not answer it; do not add facts. Reply with the rewritten query only."
    "\nExample: 'location of food' -> 'Where is the food located?'"
)
MAX_REWRITE_CHARS = 1_000
#: A rewritten query is one line; the cap stops a model that rambles instead.
MAX_TOKENS = 64
PURPOSE = "the query rewriter"
#: A rewrite may be three times the query's length, and at least this many characters: a
#: longer one is an answer or an essay, not a query.
MIN_REWRITE_ROOM = 200
_NEXT_SENTENCE = re.compile(r"[.!?]\s+\S")
_LABEL = re.compile(r"^(rewritten (search )?query|query|question|search query)\s*:\s*", re.I)
_REFUSAL = re.compile(r"^(i'?m sorry|sorry|i cannot|i can'?t|as an ai)\b", re.I)
_ANSWER = re.compile(r"^(the (correct )?answer is|answer)\b", re.I)


class QueryRewriter(Protocol):
    """Turns a query into the text to search with."""

    name: str

    async def rewrite(self, query: str) -> str: ...


class MalformedRewriteError(ValueError):
    """The model's text is not one query that keeps the user's words."""


class ChatRewriter:
    """Rewrites with a chat model (Cohere or an OpenAI-compatible endpoint) and checks what
    comes back: a small model often answers, refuses or wanders off instead of rewriting."""

    def __init__(self, chat: ChatModel, instruction: str = INSTRUCTION) -> None:
        self.chat = chat
        self.instruction = instruction
        self.name = chat.name

    async def rewrite(self, query: str) -> str:
        return checked(query, await self.chat.chat(self.instruction, query, max_tokens=MAX_TOKENS))


def checked(query: str, text: str) -> str:
    """The rewrite's first line without quotes or a label.

    Raises:
        MalformedRewriteError: nothing is left, it is too long or several sentences, it
            refuses or answers, or it keeps none of the query's content words (so it would
            search for something else).
    """
    line = next((x for x in text.splitlines() if x.strip()), "")
    line = _LABEL.sub("", line.strip()).strip().strip("\"'`").strip()
    if not line:
        raise MalformedRewriteError("the rewrite is empty")
    longest = min(MAX_REWRITE_CHARS, max(MIN_REWRITE_ROOM, 3 * len(query)))
    if len(line) > longest:
        raise MalformedRewriteError(f"the rewrite is longer than {longest} characters")
    if _NEXT_SENTENCE.search(line):
        raise MalformedRewriteError("the rewrite is several sentences: an answer, not a query")
    if _REFUSAL.match(line):
        raise MalformedRewriteError(f"the model refused: {line[:80]!r}")
    if _ANSWER.match(line):
        raise MalformedRewriteError(f"the model answered instead: {line[:80]!r}")
    wanted = content_terms(query)
    if wanted and not wanted & content_terms(line):
        raise MalformedRewriteError(f"the rewrite keeps none of the query's words: {line[:80]!r}")
    return line


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


def create_rewriter(
    kind: str, cohere: CohereSettings, llm: LLMSettings | None = None
) -> QueryRewriter | None:
    """The configured rewriter: ``none``, ``cohere`` or ``openai`` (an OpenAI-compatible
    endpoint, by default the local model devtools serves)."""
    if kind == "none":
        return None
    if kind in ("cohere", "openai"):
        backend: ChatBackend = "cohere" if kind == "cohere" else "openai"
        return ChatRewriter(create_chat(backend, llm or LLMSettings(), cohere, PURPOSE))
    raise ValueError(f"unknown query rewriter {kind!r}")
