"""The bus contract: every message that crosses NATS, as frozen, versioned pydantic models."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    field_validator,
    model_validator,
)

from kbus_shared.identifiers import DocumentId, LibraryId, TenantId, content_version
from kbus_shared.vectors import Vector

SCHEMA_VERSION: Literal[1] = 1
MAX_K = 100

Metadata = dict[str, JsonValue]
MetadataScalar = str | int | float | bool


MAX_METADATA_KEYS = 256
MAX_METADATA_BYTES = 16 * 1024


def _count_keys(value: JsonValue) -> int:
    """Keys in a JSON value, nested objects and lists included."""
    if isinstance(value, dict):
        return len(value) + sum(_count_keys(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count_keys(v) for v in value)
    return 0


class Contract(BaseModel):
    """Base of every message: immutable, strict about unknown fields, versioned."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION


class ContentType(StrEnum):
    """Document formats the ingestor understands."""

    PLAIN = "text/plain"
    MARKDOWN = "text/markdown"


# --- documents and the indexing pipeline -----------------------------------------------------


class BodyRef(Contract):
    """Where a document's text waits when the document is too large for one message.

    The claim check: the text is an object in the JetStream object store, and the message
    carries this reference instead. The ingestor fetches it, checks it, and removes it once the
    document is processed.
    """

    bucket: str = Field(max_length=256)
    name: str = Field(max_length=1_024)
    size: int = Field(ge=0, description="Bytes of the UTF-8 text.")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class DocumentAdded(Contract):
    """A document to index, published on ``document.added`` by any service.

    The text travels in ``text``, or, for a document larger than the bus's message limit, in
    the object store with ``body`` saying where (``text`` is then empty).
    """

    tenant: TenantId
    library: LibraryId
    document_id: DocumentId
    title: str = Field(max_length=1_000)
    text: str
    source_uri: str = Field(default="", max_length=4_096)
    content_type: ContentType = ContentType.PLAIN
    metadata: Metadata = Field(default_factory=dict)
    version: str | None = Field(
        default=None,
        max_length=128,
        description="The publisher's version of this document; derived from its content if absent.",
    )
    body: BodyRef | None = Field(
        default=None, description="The claim check of a large document's text (else absent)."
    )

    @model_validator(mode="after")
    def _text_or_body(self) -> DocumentAdded:
        if self.body is not None:
            if self.text:
                raise ValueError("text must be empty when body refers to the text")
        elif not self.text.strip():
            raise ValueError("text is empty or whitespace only")
        return self

    @field_validator("metadata")
    @classmethod
    def _metadata_bounded(cls, value: Metadata) -> Metadata:
        keys = _count_keys(value)
        if keys > MAX_METADATA_KEYS:
            raise ValueError(f"metadata has {keys} keys; the limit is {MAX_METADATA_KEYS}")
        size = len(json.dumps(value))
        if size > MAX_METADATA_BYTES:
            raise ValueError(f"metadata is {size} bytes as JSON; the limit is {MAX_METADATA_BYTES}")
        return value

    def _content(self) -> str:
        return self.text if self.body is None else f"sha256:{self.body.sha256}"

    def effective_version(self) -> str:
        """The publisher's version, or one derived from everything that is indexed."""
        return self.version or content_version(
            self.title,
            self._content(),
            self.source_uri,
            self.content_type.value,
            json.dumps(self.metadata, sort_keys=True),
        )

    def message_id(self) -> str:
        """The ``Nats-Msg-Id`` of this publish: tenant, library, id and a hash of the content.

        JetStream drops a second publish with the same id inside the stream's duplicate window,
        so an identical re-send is not processed twice; a changed document has another id.
        """
        digest = content_version(
            self.effective_version(),
            self.title,
            self._content(),
            self.source_uri,
            self.content_type.value,
            json.dumps(self.metadata, sort_keys=True),
        )
        return f"{self.tenant}/{self.library}/{self.document_id}/{digest}"


class DocumentDeleted(Contract):
    """Remove a document (``document_id`` set), a whole library, or a whole tenant.

    Published on ``document.deleted``. Applies to everything published before it; a document
    published after it is indexed again.
    """

    tenant: TenantId
    library: LibraryId | None = None
    document_id: DocumentId | None = None

    @field_validator("document_id")
    @classmethod
    def _document_needs_library(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("library") is None:
            raise ValueError("a document_id needs its library")
        return value


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
        "(kbus_shared.analysis) of its title, headings and a window of the document around it.",
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
    sequence: int = Field(
        default=0,
        ge=0,
        description="Stream sequence of the document.added message: later publishes win.",
    )


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

    def split(self, part_chunks: int) -> list[ChunksReady]:
        """The chunks in messages of at most ``part_chunks`` chunks each."""
        groups = [self.chunks[i : i + part_chunks] for i in range(0, len(self.chunks), part_chunks)]
        return [
            self.model_copy(update={"part": n, "parts": len(groups), "chunks": group})
            for n, group in enumerate(groups)
        ]


class EmbeddedChunk(Chunk):
    """A chunk with its vector."""

    vector: Vector


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


class DocumentIndexed(Contract):
    """Receipt: the document's current version is searchable (``document.indexed``)."""

    tenant: TenantId
    library: LibraryId
    document_id: DocumentId
    version: str
    chunk_count: int
    model: str


class DocumentRemoved(Contract):
    """Receipt: what a :class:`DocumentDeleted` removed (``document.removed``)."""

    tenant: TenantId
    library: LibraryId | None
    document_id: DocumentId | None
    chunks_deleted: int


class DeadLetter(Contract):
    """A message a stage could not process, with the reason (``deadletter.<stage>``)."""

    stage: str
    reason: str
    code: str
    subject: str
    stream_sequence: int | None = None
    deliveries: int | None = None
    tenant: str | None = None
    library: str | None = None
    document_id: str | None = None
    original: str = Field(
        description="The original payload (truncated), for inspection and replay."
    )
    original_size: int


class DocumentFailed(Contract):
    """Receipt: a document will not be indexed (``document.failed``); its dead letter has more."""

    tenant: str
    library: str
    document_id: str
    stage: str
    code: str
    reason: str


class MaxDeliveriesAdvisory(BaseModel):
    """The server's ``io.nats.jetstream.advisory.v1.max_deliver`` event (the fields we use)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    stream: str
    consumer: str
    stream_seq: int
    deliveries: int


# --- request-reply ---------------------------------------------------------------------------


class ErrorInfo(Contract):
    """A typed error: what failed, where, and whether retrying can help."""

    code: str
    message: str
    stage: str
    retryable: bool = False


class ErrorReply(Contract):
    """The reply to any request that could not be answered."""

    kind: Literal["error"] = "error"
    error: ErrorInfo


class InputType(StrEnum):
    """Asymmetric models embed queries and documents differently."""

    QUERY = "search_query"
    DOCUMENT = "search_document"


class EmbedRequest(Contract):
    """Ask the embedder for vectors (``kb.embed``)."""

    texts: tuple[Annotated[str, Field(min_length=1, max_length=8_192)], ...] = Field(
        min_length=1, max_length=256
    )
    input_type: InputType = InputType.QUERY


class EmbedReply(Contract):
    """Vectors for an :class:`EmbedRequest`, in order."""

    kind: Literal["embeddings"] = "embeddings"
    model: str
    dimension: int
    vectors: tuple[Vector, ...]


class SearchType(StrEnum):
    """How candidates are found."""

    HYBRID = "hybrid"
    VECTOR = "vector"
    KEYWORD = "keyword"


class SearchRequest(Contract):
    """A question for the knowledge base (``kb.search``)."""

    tenant: TenantId
    libraries: tuple[LibraryId, ...] = Field(max_length=100)
    query: str = Field(min_length=1, max_length=4_096)
    k: int = Field(default=5, ge=1, le=MAX_K)
    search_type: SearchType = SearchType.HYBRID
    alpha: float | None = Field(default=None, ge=0.0, le=1.0)
    min_score: float | None = Field(
        default=None, ge=0.0, description="Drop hits whose final score is lower."
    )
    min_similarity: float | None = Field(
        default=None,
        ge=-1.0,
        le=1.0,
        description="Answer no_match when even the best candidate's cosine similarity to the "
        "query is lower (vector and hybrid search; the server's calibrated default if unset).",
    )
    rewrite: bool | None = Field(
        default=None,
        description="Rewrite the query before searching, if a rewriter is configured "
        "(the server's default if unset).",
    )
    rerank: bool | None = Field(
        default=None,
        description="Re-score the first candidates with the reranker (true: or fail; unset: the "
        "server's default, on, falling back to first-stage order if no reranker answers).",
    )
    rerank_depth: int | None = Field(
        default=None,
        ge=1,
        le=50,
        description="How many first-stage candidates the reranker re-scores (the server's "
        "default if unset). Deeper can rank better and costs time per candidate.",
    )
    group_by_document: bool = Field(
        default=False,
        description="Return each document once, at the rank of its best chunk; k counts documents.",
    )
    exclude_documents: tuple[DocumentId, ...] = Field(
        default=(), max_length=100, description="Document ids that must not be returned."
    )
    filters: dict[str, MetadataScalar | tuple[MetadataScalar, ...]] = Field(
        default_factory=dict,
        max_length=32,
        description="Equality on top-level metadata keys; a list means any of its values.",
    )

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is empty or whitespace only")
        return value


class Scores(Contract):
    """Every score that placed a hit, each named for what it is.

    ``keyword`` is the raw BM25 score; ``vector`` the cosine similarity of query and chunk;
    ``fused`` the hybrid score ``alpha*norm(vector) + (1-alpha)*norm(keyword)`` over the
    min-max-normalised candidate lists (0..1, relative to this result set); ``rerank`` the
    reranker's score (``SearchReply.reranker`` names it; ``+prior(w)`` means its normalised
    score blended with weight ``w`` of the fused score); ``final`` is the score the hits are
    ordered by and that ``min_score`` is applied to (``SearchReply.score_kind`` says which).
    """

    keyword: float | None = None
    vector: float | None = None
    fused: float | None = None
    rerank: float | None = None
    final: float


class SearchHit(Contract):
    """One chunk in a search reply."""

    chunk_id: str
    document_id: str
    library: str
    title: str
    text: str
    heading_path: tuple[str, ...]
    source_uri: str
    char_start: int
    char_end: int
    position: int
    version: str
    metadata: Metadata
    scores: Scores


class StageTimings(Contract):
    """Milliseconds spent in each stage of one search."""

    rewrite_ms: float = 0.0
    embed_ms: float = 0.0
    search_ms: float = 0.0
    rerank_ms: float = 0.0
    total_ms: float = 0.0


class SearchReply(Contract):
    """The answer to a :class:`SearchRequest`."""

    kind: Literal["search_results"] = "search_results"
    results: tuple[SearchHit, ...]
    searched: bool = Field(description="False when the request named no library: nothing was run.")
    no_match: bool = Field(
        description="True when the search ran but found nothing relevant enough: no candidate, "
        "the best cosine similarity under min_similarity, or no hit over min_score."
    )
    candidates: int = Field(description="How many candidates the store returned before reranking.")
    search_type: SearchType
    alpha: float
    min_score: float
    min_similarity: float | None = Field(
        default=None, description="The similarity floor applied (None in keyword search)."
    )
    best_similarity: float | None = Field(
        default=None,
        description="The highest cosine similarity of any candidate to the query: how close "
        "the library came to the question.",
    )
    query: str = Field(default="", description="The query searched (after any rewriting).")
    score_kind: str = Field(
        description="What `scores.final` is: rerank (the reranker's score), fused (relative "
        "hybrid score, 0..1), cosine (vector similarity) or bm25 (raw keyword score)."
    )
    model: str
    reranker: str
    timings: StageTimings


class RerankCandidate(Contract):
    """A passage for the reranker to score."""

    id: str
    text: str = Field(max_length=16_384)
    prior: float | None = Field(default=None, description="The first-stage score, 0..1, if any.")


class RerankRequest(Contract):
    """Ask the reranker to score passages for a query (``kb.rerank``)."""

    query: str = Field(min_length=1, max_length=4_096)
    candidates: tuple[RerankCandidate, ...] = Field(max_length=1_000)


class RerankReply(Contract):
    """Scores for a :class:`RerankRequest`, one per candidate, in the request's order."""

    kind: Literal["rerank_scores"] = "rerank_scores"
    model: str
    scores: tuple[float, ...]


class StatsRequest(Contract):
    """Ask what a tenant has indexed (``kb.stats``)."""

    tenant: TenantId


class LibraryStats(Contract):
    """What one library holds."""

    library: str
    documents: int
    chunks: int


class StatsReply(Contract):
    """The answer to a :class:`StatsRequest`."""

    kind: Literal["stats"] = "stats"
    tenant: str
    libraries: tuple[LibraryStats, ...]
