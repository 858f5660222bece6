"""The prompted reranker: a chat model judges each candidate, told by the library's profile what
relevant means there ("the same product, not an accessory for it").

Each candidate is one call: the model is asked whether the passage is relevant and answers yes
or no; the score is the probability it gives "yes" against "no" at the first token (an
endpoint without log-probabilities gives 1 or 0). A model that answers anything else has not
judged, so the request fails with ``rerank_malformed`` and the searcher keeps the first stage's
order, saying so: a made-up score would reorder on nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
from kbus_contract import ChatState
from kbus_contract.errors import ErrorCode, PermanentError
from kbus_runtime.chat import (
    ChatBackend,
    ChatModel,
    LLMSettings,
    MalformedAnswerError,
    create_chat,
    state_of,
)
from kbus_runtime.settings import CohereSettings

SYSTEM = (
    "You judge whether a passage answers a search query. What relevant means here: "
    "{instruction}\nAnswer with one word: yes or no."
)
MESSAGE = "Query: {query}\n\nPassage: {passage}\n\nIs the passage relevant to the query?"
ANSWERS = ("yes", "no")
PURPOSE = "the prompted reranker"


class PromptedScorer:
    """Scores passages with a chat model's yes/no judgement, ``concurrency`` calls at once."""

    def __init__(self, chat: ChatModel, concurrency: int, max_passage_chars: int) -> None:
        self.chat = chat
        self.name = f"prompted:{chat.name}"
        self.max_passage_chars = max_passage_chars
        self._calls = asyncio.Semaphore(concurrency)

    async def score(self, instruction: str, query: str, passages: Sequence[str]) -> np.ndarray:
        """P(yes) for each passage, in order.

        Raises:
            TransientError: the model is down, slow or overloaded.
            PermanentError: it refused the request, or (``rerank_malformed``) answered other
                than yes or no.
        """
        system = SYSTEM.format(instruction=instruction)
        judged = await asyncio.gather(*(self._judge(system, query, p) for p in passages))
        return np.array(judged, dtype=np.float32)

    async def _judge(self, system: str, query: str, passage: str) -> float:
        message = MESSAGE.format(query=query, passage=passage[: self.max_passage_chars])
        async with self._calls:
            try:
                return (await self.chat.choose(system, message, ANSWERS))["yes"]
            except MalformedAnswerError as exc:
                raise PermanentError(exc.reason, code=ErrorCode.RERANK_MALFORMED) from exc


def create_prompted(
    backend: ChatBackend | None,
    llm: LLMSettings,
    cohere: CohereSettings,
    concurrency: int,
    max_passage_chars: int,
) -> PromptedScorer | None:
    """The prompted scorer of a backend (None: prompted reranking is not offered)."""
    if backend is None:
        return None
    chat = create_chat(backend, llm, cohere, PURPOSE)
    return PromptedScorer(chat, concurrency, max_passage_chars)


async def prompted_state(prompted: PromptedScorer | None) -> ChatState:
    """Whether prompted reranking's chat model answers now (``kb.chat.reranker``)."""
    unset = "it has no chat model for prompted reranking (set KBUS_RERANKER_PROMPTED)"
    return await state_of("reranker", prompted.chat if prompted else None, unset)
