"""Answers shaped for agents: passages that fill a token budget, each with its citation."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from kbus_contract.base import Contract

#: The largest context one search may ask for, in tokens.
MAX_BUDGET_TOKENS = 32_768
#: The smallest: a budget must hold a sentence or two.
MIN_BUDGET_TOKENS = 16


class Expand(StrEnum):
    """How much of a document around each hit a passage holds."""

    NONE = "none"
    NEIGHBOURS = "neighbours"
    SECTION = "section"
    DOCUMENT = "document"


class CutReason(StrEnum):
    """Why a passage holds less than its expansion asked for."""

    BUDGET = "budget"  # the budget ran out: cut at a sentence boundary
    WORD = "word"  # the budget ran out inside a sentence longer than what was left


class Span(Contract):
    """A piece of a document's text: ``text`` is the document's text from ``char_start`` to
    ``char_end`` (the text kbus indexed: a PDF's extracted text, a record's rendered text)."""

    char_start: int = Field(ge=0)
    char_end: int = Field(ge=0)
    page: int | None = Field(default=None, description="The page the span begins on, if any.")
    heading_path: tuple[str, ...] = Field(default=(), description="The section the span begins in.")


class Highlight(Contract):
    """A sentence of a passage that matched the query, in the document's offsets."""

    char_start: int = Field(ge=0)
    char_end: int = Field(ge=0)
    score: float = Field(description="The share of the query's keywords the sentence holds.")
    terms: tuple[str, ...] = Field(description="The query's keywords (analysed) it holds.")


class PassageHit(Contract):
    """A hit a passage holds: the chunk the search found, where it lies, and its score."""

    chunk_id: str
    char_start: int = Field(ge=0)
    char_end: int = Field(ge=0)
    score: float = Field(description="Its final score.")


class Citation(Contract):
    """What an agent cites a passage by, and where a person finds it."""

    document_id: str
    library: str
    title: str
    source_uri: str
    version: str
    heading_path: tuple[str, ...] = Field(description="The section of the passage's first hit.")
    pages: tuple[int, ...] = Field(default=(), description="The pages the passage lies on.")
    spans: tuple[Span, ...] = Field(
        description="Where each piece of the passage lies in the document, in order."
    )


class Passage(Contract):
    """Hits of one document that touch or overlap, with the context their expansion added."""

    rank: int = Field(ge=1, description="1 for the passage of the best hit, and so on.")
    text: str = Field(
        description="The pieces' text; pieces the chunker separated by white space it dropped "
        "are joined by a line break."
    )
    tokens: int = Field(description="Tokens of `text`, counted with the reply's tokenizer.")
    score: float = Field(description="The final score of the passage's best hit.")
    hits: tuple[PassageHit, ...] = Field(description="The hits the passage holds, best first.")
    expand: Expand
    citation: Citation
    highlights: tuple[Highlight, ...] = ()
    cut: CutReason | None = Field(
        default=None, description="Set when the budget cut the passage short, and how."
    )


class Context(Contract):
    """The passages of a search that gave ``budget_tokens``, and how they were chosen."""

    passages: tuple[Passage, ...]
    tokenizer: str = Field(description="What the tokens were counted with.")
    budget_tokens: int
    used_tokens: int = Field(description="The passages' tokens together; never over the budget.")
    expand: Expand
    adaptive: bool
    cut: str = Field(
        description="Why the passages end where they do: the budget, k, the adaptive score "
        "cut (with its numbers), or the candidates running out."
    )
    cursor: str | None = Field(
        default=None,
        description="Give it in the same search to get the passages after these (none is "
        "given twice); None when no candidate is left.",
    )
