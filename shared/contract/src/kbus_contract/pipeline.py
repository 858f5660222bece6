"""Messages between the stages: a document's chunks, then its chunks with vectors."""

from __future__ import annotations

from pydantic import Field, model_validator

from kbus_contract.base import Contract, Metadata
from kbus_contract.documents import MAX_MATCHING_TEXTS
from kbus_contract.formats import ContentType
from kbus_contract.identifiers import DocumentId, LibraryId, TenantId
from kbus_contract.lanes import Lane
from kbus_contract.profiles import Matching
from kbus_contract.vectors import Vector


class Chunk(Contract):
    """One piece of a document, small enough to embed and to show an agent."""

    chunk_id: str
    position: int = Field(ge=0)
    text: str
    char_start: int = Field(
        ge=0, description="Offset of the chunk in the document text, in code points."
    )
    char_end: int = Field(
        ge=0, description="End offset (exclusive): text == document.text[start:end]."
    )
    heading_path: tuple[str, ...] = ()
    keywords: str = Field(
        default="",
        description="What keyword search matches for this chunk: the analysed terms "
        "(kbus_runtime.analysis) of its title, headings and a window of the document around it.",
    )
    page: int | None = Field(
        default=None, ge=1, description="The PDF page or slide the chunk starts on."
    )
    metadata: Metadata = Field(
        default_factory=dict,
        description="The chunk's own metadata (a record's), over its document's.",
    )
    matching: tuple[str, ...] = Field(
        default=(),
        max_length=MAX_MATCHING_TEXTS,
        description="Texts matched besides the chunk's own (questions, a description): each is "
        "embedded and indexed on its own, and a hit on it returns this chunk.",
    )


class DocumentRef(Contract):
    """What every stage carries along about the document a message belongs to."""

    tenant: TenantId
    library: LibraryId
    document_id: DocumentId
    version: str
    title: str
    source_uri: str
    content_type: ContentType
    metadata: Metadata
    source: str = Field(default="", description="The source that owns it (document.synced).")
    access: tuple[str, ...] = Field(
        default=("*",), description="Who may read it: its principals, or * for everyone."
    )
    lane: Lane = Field(
        default=Lane.BULK,
        description="The tenant's queue the document waits in at every stage (the lane of "
        "its document.added subject).",
    )
    sequence: int = Field(
        default=0,
        ge=0,
        description="Stream sequence of the document.added message: later publishes win.",
    )

    def with_lane(self, lane: Lane) -> DocumentRef:
        """The same document, waiting in ``lane``."""
        return self.model_copy(update={"lane": lane})


class ChunksReady(Contract):
    """Chunks of one document, published by the ingestor on ``chunks.ready``.

    A document with many chunks travels in several parts (``part`` of ``parts``) so that each
    message stays well under the bus's payload limit.
    """

    document: DocumentRef
    part: int = Field(default=0, ge=0)
    parts: int = Field(default=1, ge=1)
    total_chunks: int = Field(default=0, ge=0, description="Chunks of the document in all parts.")
    chunks: tuple[Chunk, ...]
    generate: Matching | None = Field(
        default=None,
        description="The matching texts the generator writes for these chunks before they are "
        "embedded (the library's profile when the document was ingested); unset: none.",
    )

    def split(self, part_chunks: int) -> list[ChunksReady]:
        """The chunks in messages of at most ``part_chunks`` chunks each."""
        groups = [self.chunks[i : i + part_chunks] for i in range(0, len(self.chunks), part_chunks)]
        return [
            self.model_copy(update={"part": n, "parts": len(groups), "chunks": group})
            for n, group in enumerate(groups)
        ]


class EmbeddedChunk(Chunk):
    """A chunk with its vector, and one vector per matching text."""

    vector: Vector
    matching_vectors: tuple[Vector, ...] = ()

    @model_validator(mode="after")
    def _a_vector_per_matching_text(self) -> EmbeddedChunk:
        if len(self.matching_vectors) != len(self.matching):
            raise ValueError("every matching text has its vector")
        return self


class EmbeddingsReady(Contract):
    """Chunks of one document with their vectors, published on ``embeddings.ready``.

    A document with many chunks travels in several parts so that each message stays well under
    the bus's payload limit; the document is indexed when all ``total_chunks`` are stored.
    """

    document: DocumentRef
    model: str
    dimension: int = Field(gt=0)
    part: int = Field(default=0, ge=0)
    parts: int = Field(default=1, ge=1)
    total_chunks: int = Field(ge=1)
    chunks: tuple[EmbeddedChunk, ...]
