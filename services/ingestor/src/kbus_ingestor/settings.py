"""Ingestor settings (env prefix ``KBUS_INGESTOR_``)."""

from __future__ import annotations

from kbus_runtime.settings import ServiceSettings
from pydantic import Field
from pydantic_settings import SettingsConfigDict


class IngestorSettings(ServiceSettings):
    """How documents are validated and split."""

    model_config = SettingsConfigDict(env_prefix="KBUS_INGESTOR_", extra="ignore")

    http_port: int = Field(default=8101, description="Port of /health and /metrics.")
    chunk_size: int = Field(default=512, ge=16, description="Target chunk length in characters.")
    chunk_overlap: int = Field(default=50, ge=0, description="Characters shared by neighbours.")
    keyword_window: int = Field(
        default=1000,
        ge=0,
        description="Characters of the document on each side of a chunk that keyword search "
        "also matches for it (0: the chunk alone).",
    )
    part_chunks: int = Field(
        default=64,
        gt=0,
        description="Chunks per chunks.ready message (keeps each well under 1 MB).",
    )
    max_document_bytes: int = Field(
        default=8 * 1024**2,
        gt=0,
        description="Larger documents are dead-lettered (measured in UTF-8 bytes; a document "
        "over the bus's message limit arrives by claim check).",
    )
    max_chunks: int = Field(
        default=20_000, gt=0, description="Documents with more chunks are dead-lettered."
    )
    concurrency: int = Field(
        default=16,
        ge=1,
        description="document.added messages handled at once. Chunking is quick; most of a "
        "message's time is the wait for the stream to store its chunks.",
    )
