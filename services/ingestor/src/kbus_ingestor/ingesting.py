"""From a document to its chunks."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from faststream.message.message import AckStatus
from faststream.nats.message import NatsMessage
from kbus_contract import (
    Chunk,
    ChunksReady,
    ContentType,
    DocumentAdded,
    DocumentRef,
)
from kbus_contract.claimcheck import discard_body, read_body
from kbus_contract.documents import CHUNK_SEPARATOR
from kbus_contract.errors import ErrorCode, PermanentError
from kbus_contract.identifiers import chunk_id, content_version
from kbus_contract.lanes import Lane
from kbus_contract.tenancy import require_library
from kbus_runtime.analysis import TermIndex, analyze_terms, window_span
from kbus_runtime.stage import Stage, stream_sequence
from prometheus_client import CollectorRegistry, Counter

from kbus_ingestor.chunking import Span
from kbus_ingestor.fetching import PageFetcher
from kbus_ingestor.parsing import Parsed, parse
from kbus_ingestor.profiles import Profiles
from kbus_ingestor.profiling import Cutter, Piece, cut_pieces
from kbus_ingestor.sandbox import ParserPool

log = logging.getLogger("kbus.ingestor")
T = TypeVar("T")


def chunk_document(
    doc: DocumentAdded,
    cutter: Cutter,
    max_chunks: int,
    sequence: int = 0,
    keyword_window: int = 1000,
    parsed: Parsed | None = None,
) -> ChunksReady:
    """Split a document (its text, or what its bytes were parsed into) into chunks with
    deterministic ids and their keyword text.

    Raises:
        PermanentError: the document yields no chunk, or more than ``max_chunks``.
    """
    version = doc.effective_version()
    if doc.chunks is not None:
        parsed = Parsed(doc.text, markdown=False)
        pieces = _supplied(doc.chunks)
    else:
        parsed = parsed or Parsed(doc.text, markdown=doc.content_type is ContentType.MARKDOWN)
        pieces = cut_pieces(parsed, cutter)
    if not pieces:
        raise PermanentError("the document has no text to index", code=ErrorCode.EMPTY_DOCUMENT)
    if len(pieces) > max_chunks:
        raise PermanentError(
            f"the document splits into {len(pieces)} chunks; the limit is {max_chunks}",
            code=ErrorCode.TOO_LARGE,
        )
    # Each scope (the document, or a Markdown section) is analysed once for all its chunks.
    analysed: dict[tuple[int, int], tuple[list[str], TermIndex]] = {}
    chunks = tuple(
        Chunk(
            chunk_id=chunk_id(doc.tenant, doc.library, doc.document_id, version, position),
            position=position,
            text=piece.span.text,
            char_start=piece.span.start,
            char_end=piece.span.end,
            heading_path=piece.heading_path,
            keywords=_keywords(doc.title, parsed.text, piece, keyword_window, analysed),
            page=parsed.page_at(piece.span.start),
            metadata=piece.metadata or {},
            matching=doc.matching[position] if doc.matching else (),
        )
        for position, piece in enumerate(pieces)
    )
    ref = DocumentRef(
        tenant=doc.tenant,
        library=doc.library,
        document_id=doc.document_id,
        version=version,
        title=doc.title,
        source_uri=doc.source_uri,
        content_type=doc.content_type,
        metadata=doc.metadata,
        source=doc.source or "",
        access=doc.readers(),
        sequence=sequence,
    )
    return ChunksReady(document=ref, total_chunks=len(chunks), chunks=chunks)


def ranked_as(doc: DocumentAdded, sequence: int) -> int:
    """The sequence a publish ranks by: its own, or for a text cut again, the publish it was
    cut from (so that whatever was published after that one still wins).

    Raises:
        PermanentError: ``recut_of`` names a publish after this one.
    """
    if doc.recut_of is None:
        return sequence
    if sequence and doc.recut_of > sequence:
        raise PermanentError(
            f"recut_of {doc.recut_of} names a publish after this one ({sequence})",
            code=ErrorCode.INVALID_MESSAGE,
        )
    return doc.recut_of


def _keywords(
    title: str,
    text: str,
    piece: Piece,
    size: int,
    analysed: dict[tuple[int, int], tuple[list[str], TermIndex]],
) -> str:
    """``keyword_text`` of a chunk's title, headings and window, from its scope's analysis
    (a scope's chunks share its heading path)."""
    # A window never crosses into another section: a short section must not be found by its
    # neighbours' words.
    begin, end = piece.scope
    if piece.scope not in analysed:
        head = analyze_terms(" ".join((title, *piece.heading_path)))
        analysed[piece.scope] = (head, TermIndex(text[begin:end]))
    head, index = analysed[piece.scope]
    start, stop = window_span(index.text, piece.span.start - begin, piece.span.end - begin, size)
    return " ".join(head + index.terms(start, stop))


def _supplied(chunks: tuple[str, ...]) -> list[Piece]:
    """The publisher's chunks where they stand in the text (joined by ``CHUNK_SEPARATOR``);
    each is its own keyword scope."""
    pieces, start = [], 0
    for chunk in chunks:
        end = start + len(chunk)
        pieces.append(Piece(Span(start, end, chunk), (), (start, end)))
        start = end + len(CHUNK_SEPARATOR)
    return pieces


#: A text larger than this is cut on a worker thread: the event loop goes on taking other
#: documents (another tenant's small one) while it is cut.
INLINE_BYTES = 64 * 1024


async def _inline_or_thread(large: bool, work: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(work, *args) if large else work(*args)


class Ingestor:
    """Validates documents, splits them and publishes their chunks."""

    def __init__(
        self,
        stage: Stage,
        profiles: Profiles,
        *,
        max_document_bytes: int,
        max_chunks: int,
        registry: CollectorRegistry,
        parser: ParserPool,
        fetcher: PageFetcher,
        keyword_window: int = 1000,
        part_chunks: int = 64,
    ) -> None:
        self.stage = stage
        self.parser = parser
        self.fetcher = fetcher
        self.profiles = profiles
        self.keyword_window = keyword_window
        self.part_chunks = part_chunks
        self.max_document_bytes = max_document_bytes
        self.max_chunks = max_chunks
        self.chunks_made = Counter("kbus_ingestor_chunks", "Chunks produced", registry=registry)

    async def handle(self, message: NatsMessage) -> None:
        """Settle one ``document.added`` message."""
        if len(message.body) > self.max_document_bytes:
            # Checked before parsing, so a huge document costs no memory beyond its bytes.
            await self.stage.settle(message, DocumentAdded, self._too_large(len(message.body)))
            return
        sequence = stream_sequence(message) or 0
        topology = self.stage.topology
        sent = topology.identity(message.raw_message.subject)
        _, lane = topology.tenant_lane("document.added", message.raw_message.subject) or (
            "",
            Lane.BULK,
        )
        claimed: list[DocumentAdded] = []

        async def work(doc: DocumentAdded) -> None:
            require_library(sent, doc.tenant, doc.library)
            if doc.body is not None:
                claimed.append(doc)
            await self.ingest(doc, ranked_as(doc, sequence), lane)

        await self.stage.settle(message, DocumentAdded, work)
        # Done with once indexed: the text can go. A dead-lettered document keeps it (until the
        # store's age limit), so that its replay finds it; a nacked one, for its next delivery.
        if claimed and message.committed is AckStatus.ACKED:
            await self._discard(claimed[0])

    async def ingest(self, doc: DocumentAdded, sequence: int = 0, lane: Lane = Lane.BULK) -> None:
        """Read a document (its text, its claim-checked bytes or its web page), parse it, and
        publish its chunks (in the tenant's ``lane`` it came in)."""
        doc, content_type, data = await self._read(doc)
        large = len(data) > INLINE_BYTES
        if content_type in (ContentType.PLAIN, ContentType.MARKDOWN):
            parsed = await _inline_or_thread(
                large, parse, content_type, data, None, self.parser.limits
            )
        else:
            parsed = await self.parser.parse(content_type, data, doc.template)
        # The version stays what the message gave (or its fetched bytes), so every redelivery
        # yields the same ids.
        doc = doc.model_copy(
            update={"title": doc.title or parsed.title, "version": doc.effective_version()}
        )
        cutter, profile = await self.profiles.for_ingest(doc.tenant, doc.library)
        ready = await _inline_or_thread(
            large,
            chunk_document,
            doc,
            cutter,
            self.max_chunks,
            sequence,
            self.keyword_window,
            parsed,
        )
        ready = ready.model_copy(update={"document": ready.document.with_lane(lane)})
        topology = self.stage.topology
        channel = "chunks.ready"
        if profile.matching.generated and doc.matching is None:
            # The generator writes the matching texts, then passes the chunks on to be embedded;
            # a publisher's own matching texts are kept as they are.
            ready = ready.model_copy(update={"generate": profile.matching})
            channel = "chunks.generate"
        subject = topology.in_lane(channel, lane, tenant=doc.tenant)
        for part in ready.split(self.part_chunks):
            await self.stage.publish(part, subject, stream=topology.chunks_stream.name)
        self.chunks_made.inc(len(ready.chunks))

    async def _read(self, doc: DocumentAdded) -> tuple[DocumentAdded, ContentType, bytes]:
        """The document's bytes and their type, from wherever the message says they are."""
        if doc.url is not None:
            page = await self.fetcher.fetch(doc.url)
            version = doc.version or content_version(
                doc.effective_version(), hashlib.sha256(page.data).hexdigest()
            )
            update = {"source_uri": doc.source_uri or page.url, "version": version}
            return doc.model_copy(update=update), page.content_type, page.data
        if doc.body is None:
            return doc, doc.content_type, doc.text.encode("utf-8")
        if doc.body.size > self.max_document_bytes:
            # Refused from the reference alone: a huge body is never read into memory.
            raise PermanentError(
                f"the document is {doc.body.size} bytes; the limit is {self.max_document_bytes}",
                code=ErrorCode.TOO_LARGE,
            )
        js = self.stage.broker.connection.jetstream()
        data = await read_body(js, self.stage.topology, doc.tenant, doc.library, doc.body)
        return doc, doc.content_type, data

    async def _discard(self, doc: DocumentAdded) -> None:
        # After the ack: a crash before this line leaves parts the store's age limit removes.
        assert doc.body is not None
        js = self.stage.broker.connection.jetstream()
        try:
            await discard_body(js, self.stage.topology, doc.tenant, doc.library, doc.body)
        except Exception as exc:
            log.warning("could not remove claim-checked text %s: %s", doc.body.name, exc)

    def _too_large(self, size: int) -> Callable[[DocumentAdded], Awaitable[None]]:
        async def refuse(_: DocumentAdded) -> None:
            raise PermanentError(
                f"the message is {size} bytes; the limit is {self.max_document_bytes}",
                code=ErrorCode.TOO_LARGE,
            )

        return refuse
