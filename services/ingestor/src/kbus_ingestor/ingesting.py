"""From a document to its chunks."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from faststream.message.message import AckStatus
from faststream.nats.message import NatsMessage
from kbus_contract import (
    BodyRef,
    Chunk,
    ChunksReady,
    ContentType,
    DocumentAdded,
    DocumentRef,
)
from kbus_contract.claimcheck import fetch_body, open_bodies
from kbus_contract.errors import PermanentError
from kbus_contract.identifiers import chunk_id
from kbus_contract.tenancy import require_library
from kbus_runtime.analysis import TermIndex, analyze_terms, window_span
from kbus_runtime.stage import Stage, stream_sequence
from nats.js.errors import BucketNotFoundError, NotFoundError
from nats.js.object_store import ObjectStore
from prometheus_client import CollectorRegistry, Counter

from kbus_ingestor.chunking import ChunkingConfig, Span, split_text
from kbus_ingestor.markdown import sections

log = logging.getLogger("kbus.ingestor")


def chunk_document(
    doc: DocumentAdded,
    config: ChunkingConfig,
    max_chunks: int,
    sequence: int = 0,
    keyword_window: int = 1000,
) -> ChunksReady:
    """Split a document into chunks with deterministic ids and their keyword text.

    Raises:
        PermanentError: the document yields no chunk, or more than ``max_chunks``.
    """
    version = doc.effective_version()
    pieces = _pieces(doc, config)
    if not pieces:
        raise PermanentError("the document has no text to index", code="empty_document")
    if len(pieces) > max_chunks:
        raise PermanentError(
            f"the document splits into {len(pieces)} chunks; the limit is {max_chunks}",
            code="too_large",
        )
    # Each scope (the document, or a Markdown section) is analysed once for all its chunks.
    analysed: dict[tuple[int, int], tuple[list[str], TermIndex]] = {}
    chunks = tuple(
        Chunk(
            chunk_id=chunk_id(doc.tenant, doc.library, doc.document_id, version, position),
            position=position,
            text=span.text,
            char_start=span.start,
            char_end=span.end,
            heading_path=path,
            keywords=_keywords(doc, path, span, scope, keyword_window, analysed),
        )
        for position, (span, path, scope) in enumerate(pieces)
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
        sequence=sequence,
    )
    return ChunksReady(document=ref, total_chunks=len(chunks), chunks=chunks)


class Piece(NamedTuple):
    """A chunk's span, its heading path, and the part of the document its keyword window may
    cover (its Markdown section, or the whole text)."""

    span: Span
    heading_path: tuple[str, ...]
    scope: tuple[int, int]


def _keywords(
    doc: DocumentAdded,
    path: tuple[str, ...],
    span: Span,
    scope: tuple[int, int],
    size: int,
    analysed: dict[tuple[int, int], tuple[list[str], TermIndex]],
) -> str:
    """``keyword_text`` of a chunk's title, headings and window, from its scope's analysis
    (a scope's chunks share its heading path)."""
    # A window never crosses into another section: a short section must not be found by its
    # neighbours' words.
    begin, end = scope
    if scope not in analysed:
        head = analyze_terms(" ".join((doc.title, *path)))
        analysed[scope] = (head, TermIndex(doc.text[begin:end]))
    head, index = analysed[scope]
    start, stop = window_span(index.text, span.start - begin, span.end - begin, size)
    return " ".join(head + index.terms(start, stop))


def _pieces(doc: DocumentAdded, config: ChunkingConfig) -> list[Piece]:
    if doc.content_type is not ContentType.MARKDOWN:
        whole = (0, len(doc.text))
        return [Piece(span, (), whole) for span in split_text(doc.text, config)]
    pieces: list[Piece] = []
    found = sections(doc.text)
    # A heading with nothing under it but deeper headings is only a path: its children carry it.
    with_body = [s for s in found if s.has_body(doc.text)] or found
    for section in with_body:
        body = doc.text[section.start : section.end]
        scope = (section.start, section.end)
        pieces.extend(
            Piece(span, section.heading_path, scope)
            for span in split_text(body, config, base=section.start)
        )
    return pieces


class Ingestor:
    """Validates documents, splits them and publishes their chunks."""

    def __init__(
        self,
        stage: Stage,
        config: ChunkingConfig,
        *,
        max_document_bytes: int,
        max_chunks: int,
        registry: CollectorRegistry,
        keyword_window: int = 1000,
        part_chunks: int = 64,
    ) -> None:
        self.stage = stage
        self.config = config
        self.keyword_window = keyword_window
        self.part_chunks = part_chunks
        self.max_document_bytes = max_document_bytes
        self.max_chunks = max_chunks
        self.chunks_made = Counter("kbus_ingestor_chunks", "Chunks produced", registry=registry)
        #: Each tenant's object store of claim-checked texts, opened when first needed.
        self._bodies: dict[str, ObjectStore] = {}

    async def handle(self, message: NatsMessage) -> None:
        """Settle one ``document.added`` message."""
        if len(message.body) > self.max_document_bytes:
            # Checked before parsing, so a huge document costs no memory beyond its bytes.
            await self.stage.settle(message, DocumentAdded, self._too_large(len(message.body)))
            return
        sequence = stream_sequence(message) or 0
        sent = self.stage.topology.identity(message.raw_message.subject)
        claimed: list[tuple[str, BodyRef]] = []

        async def work(doc: DocumentAdded) -> None:
            require_library(sent, doc.tenant, doc.library)
            if doc.body is not None:
                claimed.append((doc.tenant, doc.body))
            await self.ingest(doc, sequence)

        await self.stage.settle(message, DocumentAdded, work)
        # Done with (indexed, or dead-lettered for a fault of its own): the text can go. A
        # nacked message keeps it for the next delivery.
        if claimed and message.committed in (AckStatus.ACKED, AckStatus.REJECTED):
            await self._discard(*claimed[0])

    async def ingest(self, doc: DocumentAdded, sequence: int = 0) -> None:
        """Chunk a document (fetching a claim-checked text first) and publish its chunks."""
        if doc.body is not None:
            doc = await self._claim(doc)
        ready = chunk_document(doc, self.config, self.max_chunks, sequence, self.keyword_window)
        topology = self.stage.topology
        for part in ready.split(self.part_chunks):
            await self.stage.publish(
                part, topology.chunks_ready, stream=topology.chunks_stream.name
            )
        self.chunks_made.inc(len(ready.chunks))

    async def _claim(self, doc: DocumentAdded) -> DocumentAdded:
        assert doc.body is not None
        if doc.body.size > self.max_document_bytes:
            # Refused from the reference alone: a huge text is never read into memory.
            raise PermanentError(
                f"the document is {doc.body.size} bytes; the limit is {self.max_document_bytes}",
                code="too_large",
            )
        store = await self._store(doc.tenant)
        text = await fetch_body(store, self.stage.topology.bodies_bucket(doc.tenant), doc.body)
        # The version stays what the reference gave, so every redelivery yields the same ids.
        return doc.model_copy(
            update={"text": text, "body": None, "version": doc.effective_version()}
        )

    async def _store(self, tenant: str) -> ObjectStore:
        if tenant not in self._bodies:
            js = self.stage.broker.connection.jetstream()
            try:
                self._bodies[tenant] = await open_bodies(
                    js, self.stage.topology, tenant, create=False
                )
            except (BucketNotFoundError, NotFoundError) as exc:
                raise PermanentError(
                    f"tenant {tenant!r} has no store of large texts: the claim check names "
                    "nothing that exists",
                    code="body_missing",
                ) from exc
        return self._bodies[tenant]

    async def _discard(self, tenant: str, ref: BodyRef) -> None:
        # After the ack: a crash before this line leaves an object the store's TTL removes.
        store = self._bodies.get(tenant)
        if store is None:
            return
        try:
            await store.delete(ref.name)
        except Exception as exc:
            log.warning("could not remove claim-checked text %s: %s", ref.name, exc)

    def _too_large(self, size: int) -> Callable[[DocumentAdded], Awaitable[None]]:
        async def refuse(_: DocumentAdded) -> None:
            raise PermanentError(
                f"the message is {size} bytes; the limit is {self.max_document_bytes}",
                code="too_large",
            )

        return refuse
