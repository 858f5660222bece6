"""Request-reply between the services: errors, embeddings, reranking and statistics."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, model_validator

from kbus_contract.base import MAX_QUERY_CHARS, Contract, Metadata, MetadataScalar, budget_field
from kbus_contract.identifiers import MAX_CLAIMED, LibraryId, Principal, TenantId
from kbus_contract.lanes import Lane
from kbus_contract.profiles import MAX_PROMPT_CHARS
from kbus_contract.vectors import MAX_PACKED_BYTES, PackedStates, Vector


class ErrorInfo(Contract):
    """A typed error: what failed, where, and whether retrying can help."""

    code: str
    message: str
    stage: str
    retryable: bool = False
    retry_after_s: float | None = Field(
        default=None,
        description="When asking again can help, in seconds (a budget refills, a busy stage "
        "clears); unset: at once, or after the caller's own backoff.",
    )


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

    texts: tuple[Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)], ...] = Field(
        min_length=1, max_length=256
    )
    input_type: InputType = InputType.QUERY
    budget_ms: int | None = budget_field(
        ": a request still waiting when it is spent is not embedded"
    )
    token_states: bool = Field(
        default=False,
        description="Also return the text's token states, for a reranker that scores them "
        "(a request of one text only: the states of many texts could pass NATS's payload limit).",
    )

    @model_validator(mode="after")
    def _one_text_for_states(self) -> EmbedRequest:
        if self.token_states and len(self.texts) > 1:
            raise ValueError("token_states is for a request of one text")
        return self


class EmbedReply(Contract):
    """Vectors for an :class:`EmbedRequest`, in order."""

    kind: Literal["embeddings"] = "embeddings"
    model: str
    dimension: int
    vectors: tuple[Vector, ...]
    token_states: tuple[PackedStates, ...] | None = Field(
        default=None,
        description="Each text's token states, when asked for and the model has them.",
    )


class QueryStates(Contract):
    """A query's token states from the embedder that made its vector: the reranker then encodes
    nothing for the query."""

    model: str = Field(description="The embedder's model: states of another model are ignored.")
    states: PackedStates = Field(max_length=MAX_PACKED_BYTES)


class RerankCandidate(Contract):
    """A passage for the reranker to score."""

    id: str
    text: str = Field(max_length=16_384)


class RerankRequest(Contract):
    """Ask the reranker to score passages for a query (``kb.rerank``)."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    candidates: tuple[RerankCandidate, ...] = Field(max_length=1_000)
    budget_ms: int | None = budget_field(": a request still waiting when it is spent is not scored")
    query_states: QueryStates | None = None
    instruction: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PROMPT_CHARS,
        description="Score with the prompted LLM reranker, told this is what relevant means "
        "(a library's profile); unset: the reranker's own scorer.",
    )


class RerankReply(Contract):
    """Scores for a :class:`RerankRequest`, one per candidate, in the request's order."""

    kind: Literal["rerank_scores"] = "rerank_scores"
    model: str
    scores: tuple[float, ...]


class ChatCheck(Contract):
    """Ask a service whether its chat model answers now (``kb.chat.<service>``): the
    ingestor asks before it keeps a profile whose links need one."""


class ChatState(Contract):
    """Whether a service's chat model answered a one-word request just now."""

    kind: Literal["chat_state"] = "chat_state"
    service: str
    model: str = Field(default="", description="backend/model; empty: the service has none.")
    ready: bool
    reason: str = Field(default="", description="Why not, in one sentence.")


class StatsRequest(Contract):
    """Ask what a tenant has indexed (``kb.stats``): per library, or one library's documents."""

    tenant: TenantId
    library: LibraryId | None = Field(
        default=None, description="List this library's documents (else: counts per library)."
    )
    filters: dict[str, MetadataScalar | tuple[MetadataScalar, ...]] = Field(
        default_factory=dict,
        max_length=32,
        description="Only documents whose metadata has these values (a list: any of them).",
    )
    limit: int = Field(default=100, ge=1, le=1_000, description="Documents listed at most.")
    after: str | None = Field(
        default=None,
        max_length=256,
        description="List the documents whose id sorts after this one (a reply's ``after``: "
        "the next page).",
    )
    principals: tuple[Principal, ...] = Field(
        default=(),
        max_length=MAX_CLAIMED,
        description="Whom the caller acts for: the listing and counts hold only the documents "
        "they may read (as kb.search).",
    )


class DocumentEntry(Contract):
    """One indexed document, as a listing shows it."""

    document_id: str
    title: str
    version: str
    source_uri: str
    metadata: Metadata


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
    documents: tuple[DocumentEntry, ...] = Field(
        default=(), description="The library's documents, when one was asked for, by id."
    )
    total: int = Field(
        default=0,
        description="The documents of the library the listing matched (its filters and readers), "
        "however many this page shows.",
    )
    after: str | None = Field(
        default=None,
        description="The id to list after for the next page (None: this page was the last).",
    )


class BacklogRequest(Contract):
    """Ask what of a tenant's own work waits at each stage (``kb.backlog``)."""

    tenant: TenantId


class LaneBacklog(Contract):
    """One of a tenant's lanes at one stage."""

    stage: str
    lane: Lane
    messages: int = Field(
        description="Its messages held there, waiting or being worked on: what its next one "
        "waits behind in this lane (the stage serves it in turn with other tenants)."
    )


class BacklogReply(Contract):
    """A tenant's own work at each stage, lane by lane (its libraries' together: the stages
    after the ingestor carry no library in their subjects)."""

    tenant: TenantId
    lanes: tuple[LaneBacklog, ...]


class SearchesAnswered(Contract):
    """A query searcher is answering searches now (``search.pressure``): the indexers' writes
    yield to them (docs/performance.md, "Search during an import")."""

    in_flight: int = Field(ge=0, description="Searches it is answering at this moment.")
