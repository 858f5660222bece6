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
    max_chunks: int = Field(
        default=250_000,
        gt=0,
        description="Documents with more chunks are dead-lettered (a 64 MiB text at the "
        "default sizes is about 180,000).",
    )
    parse_workers: int = Field(
        default=2,
        ge=1,
        description="Worker processes parsing HTML, PDF, Office files and records; one per "
        "core, as parsing is CPU work.",
    )
    parse_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds one document's parse may take before it is dead-lettered "
        "(parse_timeout); a document at the size limit fits at the parse times per megabyte "
        'in docs/formats.md, "Formats and sources".',
    )
    parse_memory_bytes: int = Field(
        default=2 * 1024**3,
        gt=0,
        description="Address space of each parser worker, in bytes; a document needing more is "
        "dead-lettered (too_large). The parsers' libraries take about a third of it.",
    )
    max_unpacked_bytes: int = Field(
        default=256 * 1024**2,
        gt=0,
        description="Bytes an Office file's archive may declare unpacked; more is refused before "
        "parsing (an archive bomb).",
    )
    max_records: int = Field(
        default=100_000, gt=0, description="Records a CSV or JSON document may hold."
    )
    fetch_allow: list[str] = Field(
        default=[],
        description="Hosts, addresses or networks (CIDR) whose pages may be fetched though "
        "not public (loopback, private, link-local); empty: public addresses only.",
    )
    fetch_timeout_s: float = Field(
        default=30.0, gt=0, description="Seconds a web page may take, redirects included."
    )
    fetch_max_redirects: int = Field(
        default=5, ge=0, description="Redirects followed before a page is refused."
    )
    user_agent: str = Field(
        default="kbus-ingestor",
        description="User-Agent of page fetches, and the name robots.txt rules are read for.",
    )
    concurrency: int = Field(
        default=16,
        ge=1,
        description="document.added messages handled at once. Chunking is quick; most of a "
        "message's time is the wait for the stream to store its chunks.",
    )
