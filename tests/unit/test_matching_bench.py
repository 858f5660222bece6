"""The matching bench's parsing of a model's questions (the bench itself runs by hand)."""

from __future__ import annotations

from bench.matching import questions_of


def test_only_the_lines_that_are_questions_are_kept_without_numbering() -> None:
    answer = (
        "Here are three questions:\n1. What does the receptor do in mice?\n"
        "2) What does the receptor do in mice?\n- Which diet was used?\n"
        "The passage is about obesity.\n* Why?\n3. How long did the study last?"
    )
    assert questions_of(answer, 3) == [
        "What does the receptor do in mice?",
        "Which diet was used?",
        "How long did the study last?",
    ]
    assert questions_of("A statement only.", 3) == []
