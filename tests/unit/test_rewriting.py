"""Query rewriting falls back to the query as given; it never fails a search."""

from __future__ import annotations

import pytest
from kbus_runtime.settings import CohereSettings
from kbus_searcher.rewriting import create_rewriter, rewrite_or_keep


class Fixed:
    name = "fixed"

    def __init__(self, answer: str | Exception) -> None:
        self.answer = answer

    async def rewrite(self, query: str) -> str:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def test_a_rewrite_is_used() -> None:
    assert await rewrite_or_keep(Fixed(' "Where is the food located?" '), "location of food") == (
        "Where is the food located?"
    )


@pytest.mark.parametrize("answer", [RuntimeError("timeout"), "", "   ", "x" * 5_000])
async def test_a_failed_or_unusable_rewrite_keeps_the_query(answer: str | Exception) -> None:
    assert await rewrite_or_keep(Fixed(answer), "location of food") == "location of food"


def test_no_rewriter_by_default_and_cohere_needs_a_key() -> None:
    assert create_rewriter("none", CohereSettings()) is None
    with pytest.raises(ValueError, match="KBUS_COHERE_API_KEY"):
        create_rewriter("cohere", CohereSettings(api_key=None))
    with pytest.raises(ValueError, match="unknown"):
        create_rewriter("llm", CohereSettings())
