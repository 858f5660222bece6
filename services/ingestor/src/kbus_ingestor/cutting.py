"""From a parsed document to its chunks, made a part at a time.

A large document is never held as chunks whole: it is counted first (its ``total_chunks``
travels in every part), then its chunks are made in order and sent on a part at a time, so the
ingestor's memory is its text and one part, whatever the document's size, and the embedder
starts on the first part while the rest is still being cut.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice

from kbus_contract import Chunk, ContentType, DocumentAdded, DocumentRef
from kbus_contract.documents import CHUNK_SEPARATOR
from kbus_contract.errors import ErrorCode, PermanentError
from kbus_contract.identifiers import chunk_id
from kbus_runtime.analysis import TermIndex, analyze_terms, window_span

from kbus_ingestor.chunking import Span
from kbus_ingestor.parsing import Parsed
from kbus_ingestor.profiling import Cutter, Piece, cut_pieces

#: Characters of a scope analysed at once for the keyword windows of the chunks inside them
#: (the memory a keyword index takes stays small whatever the document's size).
KEYWORD_BLOCK = 64 * 1024


@dataclass
class Keywords:
    """The keyword texts of one document's chunks, taken in order: a chunk's title, headings
    and window (up to ``size`` characters each side, inside its scope), analysed."""

    title: str
    text: str
    size: int
    _head: tuple[tuple[str, ...], list[str]] | None = field(default=None, init=False)
    _block: tuple[int, int, TermIndex] | None = field(default=None, init=False)

    def of(self, piece: Piece) -> str:
        """``keyword_text`` of one chunk."""
        # A window never crosses into another section: a short section must not be found by
        # its neighbours' words.
        begin, end = piece.scope
        span = piece.span
        start, stop = window_span(self.text, span.start, span.end, self.size, begin, end)
        path = piece.heading_path
        if self._head is None or self._head[0] != path:
            self._head = (path, analyze_terms(" ".join((self.title, *path))))
        offset, index = self._covering(start, stop, end)
        return " ".join(self._head[1] + index.terms(start - offset, stop - offset))

    def _covering(self, start: int, stop: int, end: int) -> tuple[int, TermIndex]:
        """An analysis of a block of the text holding ``[start, stop)``: the last one while it
        does (the chunks come in order), else one from ``start`` on, up to ``end``."""
        if self._block is None or not self._block[0] <= start <= stop <= self._block[1]:
            block_end = min(end, max(stop, start + KEYWORD_BLOCK))
            self._block = (start, block_end, TermIndex(self.text[start:block_end]))
        return self._block[0], self._block[2]


@dataclass(frozen=True)
class Cutting:
    """One document cut by its library's chunker: counted, then made a chunk at a time."""

    doc: DocumentAdded
    parsed: Parsed
    cutter: Cutter
    keyword_window: int = 1000

    @classmethod
    def of(
        cls, doc: DocumentAdded, cutter: Cutter, keyword_window: int, parsed: Parsed | None
    ) -> Cutting:
        """The document's text as parsed (its own text, when it was not parsed or comes in
        its publisher's chunks)."""
        if doc.chunks is not None:
            parsed = Parsed(doc.text, markdown=False)
        markdown = doc.content_type is ContentType.MARKDOWN
        return cls(doc, parsed or Parsed(doc.text, markdown=markdown), cutter, keyword_window)

    def pieces(self) -> Iterator[Piece]:
        """The chunks' spans: the publisher's own, or the library's chunker's."""
        if self.doc.chunks is not None:
            return _supplied(self.doc.chunks)
        return cut_pieces(self.parsed, self.cutter)

    def count(self, max_chunks: int) -> int:
        """How many chunks the document has.

        Raises:
            PermanentError: none, or more than ``max_chunks``.
        """
        total = sum(1 for _ in self.pieces())
        if not total:
            raise PermanentError("the document has no text to index", code=ErrorCode.EMPTY_DOCUMENT)
        if total > max_chunks:
            raise PermanentError(
                f"the document splits into {total} chunks; the limit is {max_chunks}",
                code=ErrorCode.TOO_LARGE,
            )
        return total

    def chunks(self) -> Iterator[Chunk]:
        """The chunks in order, with deterministic ids and their keyword text."""
        doc, parsed = self.doc, self.parsed
        version = doc.effective_version()
        keywords = Keywords(doc.title, parsed.text, self.keyword_window)
        for position, piece in enumerate(self.pieces()):
            yield Chunk(
                chunk_id=chunk_id(doc.tenant, doc.library, doc.document_id, version, position),
                position=position,
                text=piece.span.text,
                char_start=piece.span.start,
                char_end=piece.span.end,
                heading_path=piece.heading_path,
                keywords=keywords.of(piece),
                page=parsed.page_at(piece.span.start),
                metadata=piece.metadata or {},
                matching=doc.matching[position] if doc.matching else (),
            )

    def ref(self, sequence: int) -> DocumentRef:
        """What every part says of the document."""
        doc = self.doc
        return DocumentRef(
            tenant=doc.tenant,
            library=doc.library,
            document_id=doc.document_id,
            version=doc.effective_version(),
            title=doc.title,
            source_uri=doc.source_uri,
            content_type=doc.content_type,
            metadata=doc.metadata,
            source=doc.source or "",
            access=doc.readers(),
            sequence=sequence,
        )


def parts_of(chunks: Iterator[Chunk], size: int) -> Iterator[tuple[Chunk, ...]]:
    """The chunks, ``size`` at a time."""
    while group := tuple(islice(chunks, size)):
        yield group


def _supplied(chunks: tuple[str, ...]) -> Iterator[Piece]:
    """The publisher's chunks where they stand in the text (joined by ``CHUNK_SEPARATOR``);
    each is its own keyword scope."""
    start = 0
    for chunk in chunks:
        end = start + len(chunk)
        yield Piece(Span(start, end, chunk), (), (start, end))
        start = end + len(CHUNK_SEPARATOR)
