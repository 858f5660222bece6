"""Query transformers: before a search, a terse or odd query becomes a clear question, or the
form a library's own prompt asks for (a shopper's words as a product description).

Off by default (a library's profile or a request turns one on). A rewriter is pluggable
(anything with ``name`` and ``async rewrite``); the one that ships prompts a chat model:
Cohere's, or any OpenAI-compatible endpoint such as the local llama.cpp server devtools starts.
A rewrite that fails, is slow, or comes back in another form than asked is not an error for the
caller: the original query is searched, the reply's ``query`` says which text was searched and
``transformer`` which transformer produced it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Protocol

from kbus_contract import ChatState, TransformerKind
from kbus_runtime.analysis import content_terms
from kbus_runtime.chat import ChatBackend, ChatModel, LLMSettings, create_chat, state_of
from kbus_runtime.settings import CohereSettings

log = logging.getLogger("kbus.searcher")

INSTRUCTION = (
    "Rewrite the user's search query as one clear, self-contained question or statement for a "
    "search engine over a document collection. Keep every name, number, code and technical term "
    "exactly as written; do not answer it; do not add facts. Reply with the rewritten query only."
    "\nExample: 'location of food' -> 'Where is the food located?'"
)
#: A library's own prompt is followed by this, so that the reply is the text to search.
PROMPT_TAIL = "\nReply with the text to search only, in at most two sentences."
MAX_REWRITE_CHARS = 1_000
#: A rewritten query is one line; the cap stops a model that rambles instead.
MAX_TOKENS = 64
#: A library's prompt may ask for a description, which is longer than a question.
MAX_PROMPTED_TOKENS = 128
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

    async def rewrite(self, query: str, kind: TransformerKind, prompt: str | None) -> str: ...


class MalformedRewriteError(ValueError):
    """The model's text is not one query that keeps the user's words."""


class ChatRewriter:
    """Rewrites with a chat model (Cohere or an OpenAI-compatible endpoint) and checks what
    comes back: a small model often answers, refuses or wanders off instead of rewriting."""

    def __init__(self, chat: ChatModel) -> None:
        self.chat = chat
        self.name = chat.name

    async def rewrite(self, query: str, kind: TransformerKind, prompt: str | None) -> str:
        """The query in the form ``kind`` asks for (``prompt``: the library's instruction)."""
        if kind is TransformerKind.PROMPT and prompt is not None:
            text = await self.chat.chat(prompt + PROMPT_TAIL, query, max_tokens=MAX_PROMPTED_TOKENS)
            return checked(query, text, sentences=2)
        return checked(query, await self.chat.chat(INSTRUCTION, query, max_tokens=MAX_TOKENS))


def checked(query: str, text: str, sentences: int = 1) -> str:
    """The rewrite's first line without quotes or a label.

    Raises:
        MalformedRewriteError: nothing is left, it is too long or has more than ``sentences``
            sentences, it refuses or answers, or it keeps none of the query's content words
            (so it would search for something else).
    """
    line = next((x for x in text.splitlines() if x.strip()), "")
    line = _LABEL.sub("", line.strip()).strip().strip("\"'`").strip()
    if not line:
        raise MalformedRewriteError("the rewrite is empty")
    longest = min(MAX_REWRITE_CHARS, sentences * max(MIN_REWRITE_ROOM, 3 * len(query)))
    if len(line) > longest:
        raise MalformedRewriteError(f"the rewrite is longer than {longest} characters")
    if len(_NEXT_SENTENCE.findall(line)) >= sentences:
        raise MalformedRewriteError(
            f"the rewrite is more than {sentences} sentence(s): an answer, not a query"
        )
    if _REFUSAL.match(line):
        raise MalformedRewriteError(f"the model refused: {line[:80]!r}")
    if _ANSWER.match(line):
        raise MalformedRewriteError(f"the model answered instead: {line[:80]!r}")
    wanted = content_terms(query)
    if wanted and not wanted & content_terms(line):
        raise MalformedRewriteError(f"the rewrite keeps none of the query's words: {line[:80]!r}")
    return line


async def rewrite_or_none(
    rewriter: QueryRewriter,
    query: str,
    timeout_s: float,
    kind: TransformerKind,
    prompt: str | None = None,
) -> str | None:
    """The transformed query; None when transforming fails, takes longer than ``timeout_s`` or
    returns nothing usable (the search then runs on the query as given)."""
    try:
        async with asyncio.timeout(timeout_s):
            text = (await rewriter.rewrite(query, kind, prompt)).strip().strip('"').strip()
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


async def rewriter_state(rewriter: QueryRewriter | None) -> ChatState:
    """Whether the query transformers' chat model answers now (``kb.chat.searcher``)."""
    chat = rewriter.chat if isinstance(rewriter, ChatRewriter) else None
    unset = "it has no chat model for query transformers (set KBUS_SEARCHER_REWRITER)"
    return await state_of("searcher", chat, unset)
