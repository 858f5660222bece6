"""Query rewriting falls back to the query as given; it never fails a search."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from kbus_contract import TransformerKind
from kbus_runtime.chat import LLMSettings
from kbus_runtime.settings import CohereSettings
from kbus_searcher.search.rewriting import (
    ChatRewriter,
    MalformedRewriteError,
    checked,
    create_rewriter,
    rewrite_or_none,
)

Q = TransformerKind.QUESTION


class Fixed:
    name = "fixed"

    def __init__(self, answer: str | Exception) -> None:
        self.answer = answer

    async def rewrite(self, query: str, kind: TransformerKind, prompt: str | None) -> str:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def test_a_rewrite_is_used() -> None:
    rewritten = await rewrite_or_none(Fixed(' "Where is the food located?" '), "food", 1.0, Q)
    assert rewritten == "Where is the food located?"


@pytest.mark.parametrize("answer", [RuntimeError("timeout"), "", "   ", "x" * 5_000])
async def test_a_failed_or_unusable_rewrite_is_none(answer: str | Exception) -> None:
    assert await rewrite_or_none(Fixed(answer), "location of food", 1.0, Q) is None


async def test_a_slow_rewrite_is_given_up() -> None:
    class Slow(Fixed):
        async def rewrite(self, query: str, kind: TransformerKind, prompt: str | None) -> str:
            await asyncio.sleep(5)
            return "never"

    assert await rewrite_or_none(Slow(""), "location of food", 0.05, Q) is None


def test_no_rewriter_by_default_and_cohere_needs_a_key() -> None:
    assert create_rewriter("none", CohereSettings()) is None
    with pytest.raises(ValueError, match="KBUS_COHERE_API_KEY"):
        create_rewriter("cohere", CohereSettings(api_key=None))
    with pytest.raises(ValueError, match="unknown"):
        create_rewriter("llm", CohereSettings())


def test_the_openai_rewriter_is_named_by_its_model() -> None:
    rewriter = create_rewriter("openai", CohereSettings(), LLMSettings(model="m1"))
    assert isinstance(rewriter, ChatRewriter)
    assert rewriter.name == "openai/m1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Where is the food located?", "Where is the food located?"),
        ('  "Where is the food located?"\nIt is in the kitchen.', "Where is the food located?"),
        ("Rewritten query: Where is the food located?", "Where is the food located?"),
        ("\n\nQuestion: `Where can food be found?`", "Where can food be found?"),
    ],
)
def test_the_first_line_without_labels_or_quotes_is_the_rewrite(text: str, expected: str) -> None:
    assert checked("location of food", text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ('  ""  ', "empty"),
        ("I'm sorry, but I can't help with that.", "refused"),
        ("As an AI, I do not know.", "refused"),
        ("The perfect place to eat in the city of New York!", "none of the query's words"),
        ("Where is the " + "food " * 300, "longer than 200"),
        ("Food is found in the kitchen. It is kept cold.", "more than 1 sentence"),
        ('The answer is: "the food is in the kitchen"', "answered"),
    ],
)
def test_a_rewrite_in_another_form_is_refused(text: str, reason: str) -> None:
    with pytest.raises(MalformedRewriteError, match=reason):
        checked("location of food", text)


async def test_a_malformed_rewrite_searches_the_query_as_given() -> None:
    class Chat:
        name = "test/wanders"

        async def chat(self, instruction: str, message: str, *, max_tokens: int) -> str:
            return "The perfect place to eat in the city of New York!"

        async def choose(
            self, instruction: str, message: str, options: Sequence[str]
        ) -> dict[str, float]:
            raise NotImplementedError

    assert await rewrite_or_none(ChatRewriter(Chat()), "location of food", 1.0, Q) is None


class Prompts:
    """A chat model that says which instruction it got."""

    name = "test/echo"

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.instructions: list[str] = []

    async def chat(self, instruction: str, message: str, *, max_tokens: int) -> str:
        self.instructions.append(instruction)
        return self.reply

    async def choose(
        self, instruction: str, message: str, options: Sequence[str]
    ) -> dict[str, float]:
        raise NotImplementedError


async def test_a_library_prompt_is_the_instruction_and_may_answer_two_sentences() -> None:
    chat = Prompts("Waterproof running shoes for rain. Light trail shoes with grip.")
    rewriter = ChatRewriter(chat)
    text = await rewriter.rewrite("shoes for rain", TransformerKind.PROMPT, "Describe a product.")
    assert text.startswith("Waterproof running shoes")
    assert chat.instructions[0].startswith("Describe a product.")
    with pytest.raises(MalformedRewriteError, match="more than 1 sentence"):
        await rewriter.rewrite("shoes for rain", TransformerKind.QUESTION, None)
    assert "search query" in chat.instructions[1]
