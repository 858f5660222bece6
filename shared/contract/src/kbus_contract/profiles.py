"""A library's profile: how its documents are cut into chunks (the first link of its chain).

A profile is set over the bus (``kb.profile.{tenant}.{grant}``, answered by the ingestor, which
checks it and keeps it in a key-value bucket: each change is a new revision) and decides for the
documents ingested after it. Documents already indexed keep their chunks until they are
published again.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import Field, model_validator

from kbus_contract.base import Contract
from kbus_contract.identifiers import LibraryId, TenantId

#: The longest pattern a chunker takes (a delimiter or a product heading, not a program).
MAX_PATTERN_CHARS = 200
#: The longest document an identity chunker keeps whole, in characters.
MAX_WHOLE_CHARS = 100_000
#: The longest example text a profile request may carry to try its pattern on.
MAX_EXAMPLE_CHARS = 65_536


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
        description="identity: the longest document kept as one chunk; longer ones are refused.",
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
        if (self.kind is ChunkerKind.PATTERN) != (self.pattern is not None):
            raise ValueError("a pattern is given exactly when the chunker is 'pattern'")
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


class LibraryProfile(Contract):
    """What a library's chain does; every field has kbus's default."""

    chunker: Chunker = Field(default_factory=Chunker)


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
