"""Query rewriting falls back to the query as given; it never fails a search."""

from __future__ import annotations

import asyncio

import pytest
from kbus_runtime.settings import CohereSettings
from kbus_searcher.rewriting import create_rewriter, rewrite_or_none


class Fixed:
    name = "fixed"

    def __init__(self, answer: str | Exception) -> None:
        self.answer = answer

    async def rewrite(self, query: str) -> str:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def test_a_rewrite_is_used() -> None:
    rewritten = await rewrite_or_none(Fixed(' "Where is the food located?" '), "food", 1.0)
    assert rewritten == "Where is the food located?"


@pytest.mark.parametrize("answer", [RuntimeError("timeout"), "", "   ", "x" * 5_000])
async def test_a_failed_or_unusable_rewrite_is_none(answer: str | Exception) -> None:
    assert await rewrite_or_none(Fixed(answer), "location of food", 1.0) is None


async def test_a_slow_rewrite_is_given_up() -> None:
    class Slow(Fixed):
        async def rewrite(self, query: str) -> str:
            await asyncio.sleep(5)
            return "never"

    assert await rewrite_or_none(Slow(""), "location of food", 0.05) is None


def test_no_rewriter_by_default_and_cohere_needs_a_key() -> None:
    assert create_rewriter("none", CohereSettings()) is None
    with pytest.raises(ValueError, match="KBUS_COHERE_API_KEY"):
        create_rewriter("cohere", CohereSettings(api_key=None))
    with pytest.raises(ValueError, match="unknown"):
        create_rewriter("llm", CohereSettings())
