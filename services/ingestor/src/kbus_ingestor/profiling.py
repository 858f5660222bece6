"""A library's profile, as the ingestor applies it: the chunker it names, checked and ready.

Patterns are the tenant's own text, matched against every document of the library, so they run
on RE2: its time is linear in the text whatever the pattern (Python's backtracking ``re`` can
take hours on a pattern such as ``(a+)+$``), and it has no constructs that could.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import re2
from kbus_contract import Chunker, ChunkerKind, LibraryProfile
from kbus_contract.base import Metadata
from kbus_contract.errors import ErrorCode, PermanentError

from kbus_ingestor.chunking import ChunkingConfig, Span, iter_spans
from kbus_ingestor.markdown import sections
from kbus_ingestor.parsing import Parsed


def compile_pattern(pattern: str) -> Any:
    """The pattern, multi-line, compiled by RE2.

    Raises:
        ValueError: RE2 refuses it (say, a look-behind, which it does not have).
    """
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(f"(?m){pattern}", options=options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ValueError(f"the pattern is not one RE2 takes: {reason}") from exc


@dataclass(frozen=True)
class Cutter:
    """How one library's documents are cut: ``cut(text, base)`` gives a scope's spans."""

    chunker: Chunker
    config: ChunkingConfig
    pattern: Any = None

    @classmethod
    def recursive(cls, config: ChunkingConfig) -> Cutter:
        """kbus's default chunker at these sizes."""
        return cls(Chunker(), config)

    @classmethod
    def of(cls, profile: LibraryProfile, default: ChunkingConfig) -> Cutter:
        """The profile's chunker with the ingestor's sizes where it leaves them unset.

        Raises:
            ValueError: the sizes do not fit together or the pattern does not compile.
        """
        chunker = profile.chunker
        size = chunker.size if chunker.size is not None else default.size
        overlap = (
            chunker.overlap
            if chunker.overlap is not None
            else min(default.overlap, max(0, size // 2 - 1))
        )
        config = ChunkingConfig(size=size, overlap=overlap, min_fill=default.min_fill)
        pattern = compile_pattern(chunker.pattern) if chunker.pattern is not None else None
        return cls(chunker, config, pattern)

    @property
    def whole(self) -> bool:
        """Whether the document is cut as one text (its sections and pages are not scopes)."""
        return self.chunker.kind not in (ChunkerKind.RECURSIVE, ChunkerKind.SECTIONS)

    def scopes(self, text: str) -> list[tuple[int, int]]:
        """The parts of a document that are cut apart (a chunk never crosses one)."""
        if self.chunker.kind is ChunkerKind.PATTERN:
            starts = sorted({0, *(m.start() for m in self.pattern.finditer(text))})
            return [(a, b) for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
        return [(0, len(text))]

    def cut(self, text: str, lo: int, hi: int) -> Iterator[Span]:
        """The chunks of one scope, ``text[lo:hi]`` (offsets in ``text``).

        A sections chunker keeps a scope (a section, a page) whole up to its ``max_chars``.

        Raises:
            PermanentError: an identity chunker's document is longer than it keeps whole.
        """
        start, end = _strip(text, lo, hi)
        kind = self.chunker.kind
        whole = kind is ChunkerKind.IDENTITY or (
            kind is ChunkerKind.SECTIONS and end - start <= self.chunker.max_chars
        )
        if not whole:
            return iter_spans(text, lo, hi, self.config)
        if end - start > self.chunker.max_chars:
            raise PermanentError(
                f"the document is {end - start} characters; the library's identity chunker "
                f"keeps at most {self.chunker.max_chars} as one chunk and never cuts one",
                code=ErrorCode.TOO_LARGE,
            )
        return iter([Span(start, end, text[start:end])] if end > start else [])


def _strip(text: str, lo: int, hi: int) -> tuple[int, int]:
    """``text[lo:hi]`` without the white space at either end, as bounds."""
    while lo < hi and text[lo].isspace():
        lo += 1
    while hi > lo and text[hi - 1].isspace():
        hi -= 1
    return lo, hi


class Piece(NamedTuple):
    """A chunk's span, its heading path, the part of the document its keyword window may
    cover (its Markdown section, its record, or the whole text), and its own metadata."""

    span: Span
    heading_path: tuple[str, ...]
    scope: tuple[int, int]
    metadata: Metadata | None = None


def cut_pieces(parsed: Parsed, cutter: Cutter) -> Iterator[Piece]:
    """The chunks a parsed document is cut into, each with its heading path and scope, one at
    a time."""
    text = parsed.text
    if parsed.records:
        for r in parsed.records:
            head = (r.title,) if r.title else ()
            for span in cutter.cut(text, r.start, r.end):
                yield Piece(span, head, (r.start, r.end), r.metadata)
        return
    if cutter.whole:
        # The library's chunker decides the parts: its pattern's, or the document itself.
        scopes = cutter.scopes(text)
    elif not parsed.markdown:
        # A chunk never crosses a page, so the page it names holds all of it.
        scopes = parsed.page_spans()
    else:
        found = sections(text)
        # A heading with nothing under it but deeper headings is only a path: its children
        # carry it.
        for section in [s for s in found if s.has_body(text)] or found:
            scope = (section.start, section.end)
            for span in cutter.cut(text, *scope):
                yield Piece(span, section.heading_path, scope)
        return
    for scope in scopes:
        for span in cutter.cut(text, *scope):
            yield Piece(span, (), scope)
