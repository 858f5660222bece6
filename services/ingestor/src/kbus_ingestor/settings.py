"""Ingestor settings (env prefix ``KBUS_INGESTOR_``)."""

from __future__ import annotations

from kbus_shared.settings import ServiceSettings
from pydantic import Field
from pydantic_settings import SettingsConfigDict


class IngestorSettings(ServiceSettings):
    """How documents are validated and split."""

    model_config = SettingsConfigDict(env_prefix="KBUS_INGESTOR_", extra="ignore")

    http_port: int = Field(default=8101, description="Port of /health and /metrics.")
    chunk_size: int = Field(default=512, ge=16, description="Target chunk length in characters.")
    chunk_overlap: int = Field(default=50, ge=0, description="Characters shared by neighbours.")
    max_document_bytes: int = Field(
        default=256 * 1024,
        gt=0,
        description="Larger documents are dead-lettered (its chunks must fit in one message).",
    )
    max_chunks: int = Field(
        default=1_000, gt=0, description="Documents with more chunks are dead-lettered."
    )
