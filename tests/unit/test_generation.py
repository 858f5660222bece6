"""The generator's asks and what it accepts back from a model (its stage runs against a real
LLM in tests/integration/test_generator.py)."""

from __future__ import annotations

import pytest
from kbus_contract import LibraryProfile, Matching, MatchingKind
from kbus_contract.errors import PermanentError
from kbus_generator.prompts import ask_for, description, parsed, questions
from pydantic import ValidationError

QUESTIONS = Matching(kind=MatchingKind.QUESTIONS, count=2)
DESCRIPTION = Matching(kind=MatchingKind.DESCRIPTION)


def test_the_passage_comes_first_and_a_library_s_prompt_replaces_kbus_s() -> None:
    ask = ask_for(QUESTIONS, "Kettles boil water.")
    assert ask.message.startswith("Passage: Kettles boil water.")
    assert "Write 2 questions" in ask.message
    own = Matching(kind=MatchingKind.DESCRIPTION, prompt="Describe the product for a shopper.")
    mine = ask_for(own, "Kettle K1: 1.7 l.")
    assert (mine.system, mine.message) == (own.prompt, "Passage: Kettle K1: 1.7 l.")


def test_questions_are_the_lines_that_ask_at_most_count_each_once() -> None:
    answer = (
        "Here you go:\n1. What does a kettle do?\n2) What does a kettle do?\n- Why?\n3. How fast?"
    )
    assert questions(answer, 2) == ("What does a kettle do?", "How fast?")
    assert parsed(QUESTIONS, answer) == ("What does a kettle do?", "How fast?")


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        ('"A kettle that boils water fast."\nMore text.', ("A kettle that boils water fast.",)),
        ("A kettle. It boils water. It is fast.", ()),  # three sentences: not a description
        ("I'm sorry, I cannot describe this.", ()),
        ("", ()),
    ],
)
def test_a_description_is_one_or_two_sentences_and_not_a_refusal(
    answer: str, kept: tuple[str, ...]
) -> None:
    assert description(answer) == kept


def test_an_answer_without_the_asked_form_is_a_permanent_error_with_the_reason() -> None:
    with pytest.raises(PermanentError) as info:
        parsed(QUESTIONS, "The passage is about kettles.")
    assert info.value.code == "generation_malformed"
    assert "holds no question" in info.value.reason
    with pytest.raises(PermanentError, match="holds no description"):
        parsed(DESCRIPTION, "Sorry, I can't help with that.")


def test_a_profile_generates_only_when_it_names_a_model_written_kind() -> None:
    assert not LibraryProfile().matching.generated
    assert QUESTIONS.generated
    with pytest.raises(ValidationError, match="a prompt is for generated"):
        Matching(prompt="Write questions.")
    with pytest.raises(ValidationError):
        Matching(kind=MatchingKind.QUESTIONS, count=9)
