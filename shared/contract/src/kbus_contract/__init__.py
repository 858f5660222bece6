"""kbus's wire contract: every message, subject and stream, and one way to ask and be answered.

It needs only pydantic and nats-py, so a client process carries nothing of the services.
"""

from kbus_contract.base import SCHEMA_VERSION, Contract, Metadata, MetadataScalar
from kbus_contract.documents import (
    ORIGINAL_LIMIT,
    BodyRef,
    ContentType,
    DeadLetter,
    DocumentAdded,
    DocumentDeleted,
    DocumentFailed,
    DocumentIndexed,
    DocumentRemoved,
    MaxDeliveriesAdvisory,
)
from kbus_contract.pipeline import (
    Chunk,
    ChunksReady,
    DocumentRef,
    EmbeddedChunk,
    EmbeddingsReady,
)
from kbus_contract.requests import (
    EmbedReply,
    EmbedRequest,
    ErrorInfo,
    ErrorReply,
    InputType,
    LibraryStats,
    RerankCandidate,
    RerankReply,
    RerankRequest,
    StatsReply,
    StatsRequest,
)
from kbus_contract.search import (
    MAX_K,
    Scores,
    SearchHit,
    SearchReply,
    SearchRequest,
    SearchType,
    StageTimings,
)

__all__ = [
    "MAX_K",
    "ORIGINAL_LIMIT",
    "SCHEMA_VERSION",
    "BodyRef",
    "Chunk",
    "ChunksReady",
    "ContentType",
    "Contract",
    "DeadLetter",
    "DocumentAdded",
    "DocumentDeleted",
    "DocumentFailed",
    "DocumentIndexed",
    "DocumentRef",
    "DocumentRemoved",
    "EmbedReply",
    "EmbedRequest",
    "EmbeddedChunk",
    "EmbeddingsReady",
    "ErrorInfo",
    "ErrorReply",
    "InputType",
    "LibraryStats",
    "MaxDeliveriesAdvisory",
    "Metadata",
    "MetadataScalar",
    "RerankCandidate",
    "RerankReply",
    "RerankRequest",
    "Scores",
    "SearchHit",
    "SearchReply",
    "SearchRequest",
    "SearchType",
    "StageTimings",
    "StatsReply",
    "StatsRequest",
]
