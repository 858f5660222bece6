"""What the generator asks a chat model for each chunk, and what it accepts back.

A small model follows the form best when the passage comes first and the ask after it; asked
with an instruction alone, SmolLM2-135M wrote one statement instead of three questions. What
comes back is checked before it is kept: questions are the lines that end with a question mark
(numbering and bullets dropped); a description is the answer's first line, at most two
sentences, not a refusal. An answer with nothing of the asked form is not guessed at: the
document is dead-lettered with the reason (at temperature 0 the same text would come again).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kbus_contract import Matching, MatchingKind
from kbus_contract.documents import MAX_MATCHING_CHARS
from kbus_contract.errors import ErrorCode, PermanentError

QUESTIONS_SYSTEM = "You write quiz questions about a passage."
QUESTIONS_ASK = "Passage: {text}\n\nWrite {n} questions about this passage, one per line."
DESCRIPTION_SYSTEM = "You describe things in one or two plain sentences."
DESCRIPTION_ASK = "Passage: {text}\n\nDescribe what this passage is about in one or two sentences."
#: A question or a sentence is rarely longer; the cap stops a model that rambles.
TOKENS_PER_TEXT = 48
MIN_TEXT_CHARS = 8
_NUMBERING = re.compile(r"^\s*(\d+[.)]|[-*•])\s*")
_REFUSAL = re.compile(r"^(i'?m sorry|sorry|i cannot|i can'?t|as an ai)\b", re.I)
_NEXT_SENTENCE = re.compile(r"[.!?]\s+\S")


@dataclass(frozen=True)
class Ask:
    """One model call: the instruction, the message and the room for the answer."""

    system: str
    message: str
    max_tokens: int


def ask_for(matching: Matching, text: str) -> Ask:
    """The call that writes ``matching``'s texts for one chunk (a library's own prompt is the
    instruction, the passage its message)."""
    if matching.kind is MatchingKind.QUESTIONS:
        system, message = QUESTIONS_SYSTEM, QUESTIONS_ASK.format(text=text, n=matching.count)
        tokens = TOKENS_PER_TEXT * matching.count
    else:
        system, message = DESCRIPTION_SYSTEM, DESCRIPTION_ASK.format(text=text)
        tokens = 2 * TOKENS_PER_TEXT
    if matching.prompt is not None:
        system, message = matching.prompt, f"Passage: {text}"
    return Ask(system, message, tokens)


def parsed(matching: Matching, answer: str) -> tuple[str, ...]:
    """The matching texts in a model's answer.

    Raises:
        PermanentError: ``generation_malformed``, nothing of the asked form is in it.
    """
    if matching.kind is MatchingKind.QUESTIONS:
        found = questions(answer, matching.count)
        what = "a question"
    else:
        found = description(answer)
        what = "a description"
    if not found:
        raise PermanentError(
            f"the model's answer holds no {what[2:]}: {answer.strip()[:120]!r}",
            code=ErrorCode.GENERATION_MALFORMED,
        )
    return found


def questions(answer: str, count: int) -> tuple[str, ...]:
    """The answer's lines that are questions, without numbering, each once, at most ``count``."""
    found: list[str] = []
    for line in answer.splitlines():
        line = _NUMBERING.sub("", line).strip().strip('"').strip()
        fits = MIN_TEXT_CHARS <= len(line) <= MAX_MATCHING_CHARS
        if line.endswith("?") and fits and line not in found:
            found.append(line)
    return tuple(found[:count])


def description(answer: str) -> tuple[str, ...]:
    """The answer's first line if it is one or two sentences and not a refusal."""
    line = next((x.strip() for x in answer.splitlines() if x.strip()), "")
    line = line.strip('"').strip()
    if not MIN_TEXT_CHARS <= len(line) <= MAX_MATCHING_CHARS or _REFUSAL.match(line):
        return ()
    if len(_NEXT_SENTENCE.findall(line)) >= 2:
        return ()
    return (line,)
