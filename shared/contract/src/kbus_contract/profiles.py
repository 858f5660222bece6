"""A library's profile: the links of its chain (how its documents are cut, what their chunks
are matched by, how a query is transformed before it is searched, and how the candidates are
re-scored).

A profile is set over the bus (``kb.profile.{tenant}.{grant}``, answered by the ingestor, which
checks it and keeps it in a key-value bucket: each change is a new revision). The chunker and the
matching texts decide for the documents ingested after it: documents already indexed keep their
chunks until they are published again. The transformer and the reranker decide for every search
after it (searchers follow the bucket), since they act on queries, not on what is indexed.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import Field, model_validator

from kbus_contract.base import Contract
from kbus_contract.documents import MAX_MATCHING_TEXTS
from kbus_contract.formats import ContentType
from kbus_contract.identifiers import LibraryId, TenantId

#: The longest pattern a chunker takes (a delimiter or a product heading, not a program).
MAX_PATTERN_CHARS = 200
#: The longest document an identity chunker keeps whole, in characters.
MAX_WHOLE_CHARS = 100_000
#: The longest example text a profile request may carry to try its pattern on.
MAX_EXAMPLE_CHARS = 65_536
#: The longest instruction a profile gives a model (what relevant means, what form a query
#: takes): an instruction, not a document; it is sent with every call.
MAX_PROMPT_CHARS = 2_000


def profile_key(tenant: str, library: str) -> str:
    """A library's key in the profiles bucket."""
    return f"{tenant}.{library}"


def _given_exactly_when(
    value: object, field: str, kind: StrEnum | None, needs: StrEnum, what: str
) -> None:
    """The rule of a kind that takes a field: ``field`` is set exactly when ``kind`` is ``needs``
    (``what`` names the part of the profile)."""
    if (kind is needs) != (value is not None):
        raise ValueError(f"{field} is given exactly when the {what} is '{needs.value}'")


class ChunkerKind(StrEnum):
    """How a library's documents are cut."""

    #: By size at the strongest boundary, with overlap (kbus's default).
    RECURSIVE = "recursive"
    #: One document is one chunk, up to ``max_chars``; a longer one is dead-lettered with the
    #: reason, never cut silently.
    IDENTITY = "identity"
    #: A new chunk starts at each match of ``pattern`` (a product sheet holding several
    #: products); a part longer than ``size`` is cut further as by the recursive chunker.
    PATTERN = "pattern"
    #: One chunk per section of the document's own structure (a Markdown heading with its
    #: text, a PDF page, a slide), up to ``max_chars``; a longer one is cut by size.
    SECTIONS = "sections"


class Chunker(Contract):
    """A chunker and its parameters."""

    kind: ChunkerKind = ChunkerKind.RECURSIVE
    size: int | None = Field(
        default=None,
        ge=16,
        le=MAX_WHOLE_CHARS,
        description="Characters per chunk (recursive and pattern; unset: the ingestor's).",
    )
    overlap: int | None = Field(
        default=None, ge=0, description="Characters neighbours share (unset: the ingestor's)."
    )
    max_chars: int = Field(
        default=8_000,
        ge=1,
        le=MAX_WHOLE_CHARS,
        description="identity: the longest document kept as one chunk (longer ones are "
        "refused); sections: the longest section kept whole (longer ones are cut by size).",
    )
    pattern: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PATTERN_CHARS,
        description="pattern: a regular expression (RE2 syntax, matched line by line with ^ and "
        "$ at line ends) where each new chunk starts.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Chunker:
        _given_exactly_when(self.pattern, "a pattern", self.kind, ChunkerKind.PATTERN, "chunker")
        if self.size is not None and self.overlap is not None and self.overlap >= self.size // 2:
            raise ValueError("overlap must be less than half the chunk size")
        if self.pattern is not None:
            try:
                compiled = re.compile(self.pattern, re.MULTILINE)
            except re.error as exc:
                raise ValueError(f"the pattern does not compile: {exc}") from exc
            if compiled.search("") is not None:
                raise ValueError("the pattern matches the empty text, so it would split anywhere")
        return self


class TransformerKind(StrEnum):
    """What a query becomes before it is searched."""

    #: The query as typed.
    NONE = "none"
    #: One clear, self-contained question ("location of food": "Where is the food located?").
    QUESTION = "question"
    #: What the library's own prompt asks for (a shopper's words as a product description).
    PROMPT = "prompt"


class Transformer(Contract):
    """The query transformer of a library's searches."""

    kind: TransformerKind | None = Field(
        default=None,
        description="none, question or prompt (unset: the searcher's default, a question when "
        "its rewriter is on).",
    )
    prompt: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PROMPT_CHARS,
        description="prompt: the instruction the model gets with the query; it answers with the "
        "text to search (at most two sentences).",
    )

    @model_validator(mode="after")
    def _prompt_for_prompt(self) -> Transformer:
        _given_exactly_when(
            self.prompt, "a prompt", self.kind, TransformerKind.PROMPT, "transformer"
        )
        return self


class RerankerKind(StrEnum):
    """What re-scores a library's first candidates."""

    #: The reranker service's scorer (Cohere when it has a key, else its local model).
    DEFAULT = "default"
    #: Nobody: the first stage's order stands.
    NONE = "none"
    #: An LLM judging each candidate with the library's instruction (what relevant means).
    PROMPTED = "prompted"


class Reranking(Contract):
    """The reranker of a library's searches."""

    kind: RerankerKind = RerankerKind.DEFAULT
    instruction: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PROMPT_CHARS,
        description="prompted: what makes a passage relevant to a query in this library.",
    )
    depth: int | None = Field(
        default=None,
        ge=1,
        le=50,
        description="First-stage candidates re-scored (unset: the searcher's depth); a prompted "
        "reranker makes one model call per candidate.",
    )

    @model_validator(mode="after")
    def _instruction_for_prompted(self) -> Reranking:
        _given_exactly_when(
            self.instruction, "an instruction", self.kind, RerankerKind.PROMPTED, "reranker"
        )
        return self


class MatchingKind(StrEnum):
    """What a library's chunks are matched by, besides their own text."""

    #: Nothing else (kbus's default; a publisher may still supply matching texts).
    CONTENT = "content"
    #: Questions a chat model writes for each chunk (what it answers).
    QUESTIONS = "questions"
    #: A one- or two-sentence description a chat model writes (a product's, for shoppers).
    DESCRIPTION = "description"


class Matching(Contract):
    """The matching texts generated for a library's chunks, at ingest, by the generator."""

    kind: MatchingKind = MatchingKind.CONTENT
    count: int = Field(
        default=3, ge=1, le=MAX_MATCHING_TEXTS, description="questions: how many per chunk."
    )
    prompt: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PROMPT_CHARS,
        description="The library's own instruction instead of kbus's (the chunk follows it).",
    )

    @model_validator(mode="after")
    def _prompt_for_generation(self) -> Matching:
        if self.kind is MatchingKind.CONTENT and self.prompt is not None:
            raise ValueError("a prompt is for generated matching texts (questions, description)")
        return self

    @property
    def generated(self) -> bool:
        """Whether a model writes matching texts (the chunks then go through the generator)."""
        return self.kind is not MatchingKind.CONTENT


class LibraryProfile(Contract):
    """What a library's chain does; every field has kbus's default."""

    chunker: Chunker = Field(default_factory=Chunker)
    matching: Matching = Field(default_factory=Matching)
    transformer: Transformer = Field(default_factory=Transformer)
    reranker: Reranking = Field(default_factory=Reranking)


class ProfileRequest(Contract):
    """Read a library's profile, or set it (``kb.profile``)."""

    tenant: TenantId
    library: LibraryId
    profile: LibraryProfile | None = Field(
        default=None, description="The new profile (unset: only read the current one)."
    )
    example: str | None = Field(
        default=None,
        max_length=MAX_EXAMPLE_CHARS,
        description="A document's text to cut with the new profile before it is kept: a "
        "pattern that finds nothing in it refuses the profile, and the reply counts its chunks.",
    )
    example_type: Literal[ContentType.MARKDOWN, ContentType.PLAIN] = Field(
        default=ContentType.MARKDOWN,
        description="What the example is: Markdown is cut by its sections, as a Markdown "
        "document is when it is ingested.",
    )


#: Chunks of an example a profile reply shows, and characters of each.
PREVIEW_CHUNKS, PREVIEW_CHARS = 20, 300


class ExampleChunk(Contract):
    """One chunk of a profile's example, as the library's chunker cut it."""

    heading_path: tuple[str, ...] = ()
    text: str


class ProfileReply(Contract):
    """A library's profile and its revision (0: never set, kbus's defaults)."""

    kind: Literal["library_profile"] = "library_profile"
    tenant: str
    library: str
    revision: int
    profile: LibraryProfile
    example_chunks: int | None = Field(
        default=None, description="How many chunks the request's example was cut into."
    )
    example_preview: tuple[ExampleChunk, ...] = Field(
        default=(),
        description="The first chunks of the request's example (at most "
        f"{PREVIEW_CHUNKS}, each's text to {PREVIEW_CHARS} characters): the preview.",
    )
