"""Embedder settings (env prefix ``KBUS_EMBEDDER_``)."""

from __future__ import annotations

from enum import StrEnum

from kbus_runtime.settings import DEPLOY, CohereSettings, ServiceSettings
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class EmbedBackend(StrEnum):
    """The embedding backends (made by :data:`kbus_embedder.embedding.BACKENDS`)."""

    AUTO = "auto"
    COHERE = "cohere"
    OPENAI = "openai"
    LOCAL = "local"


class OpenAIEmbeddingSettings(BaseSettings):
    """An OpenAI-compatible embeddings endpoint (env prefix ``KBUS_EMBEDDER_OPENAI_``): OpenAI,
    vLLM, Text Embeddings Inference, Ollama, Infinity, a llama.cpp server."""

    model_config = SettingsConfigDict(env_prefix="KBUS_EMBEDDER_OPENAI_", extra="ignore")

    url: str | None = Field(
        json_schema_extra=DEPLOY,
        default=None,
        description="Base URL of the endpoint, ending before /embeddings (such as "
        "https://api.openai.com/v1); with it set and no Cohere key, auto embeds here.",
    )
    model: str = Field(
        default="text-embedding-3-small",
        description="Model name sent to the endpoint; vectors are indexed as openai/<model>.",
    )
    api_key: SecretStr | None = Field(
        json_schema_extra=DEPLOY,
        default=None,
        description="Bearer token for the endpoint (secret), if it wants one.",
    )
    dimensions: int | None = Field(
        default=None,
        gt=0,
        description="Vector length asked for (models that can shorten theirs) and checked in "
        "every answer; unset: the server's own, asked once at start.",
    )
    batch_size: int = Field(
        default=64, gt=0, description="Texts per call at most (the server's limit)."
    )
    concurrency: int = Field(default=4, ge=1, description="Calls in flight at once.")
    timeout_s: float = Field(default=30.0, gt=0, description="Timeout of one call, seconds.")
    rate_limit_wait_s: float = Field(
        default=30.0,
        ge=0.0,
        description="Seconds a call waits out 429 answers (Retry-After, else doubling pauses) "
        "before its work is handed back to be tried later.",
    )


class EmbedderSettings(ServiceSettings):
    """Which model embeds, and how much work is done at once."""

    model_config = SettingsConfigDict(env_prefix="KBUS_EMBEDDER_", extra="ignore")

    http_port: int = Field(default=8102, description="Port of /health and /metrics.")
    backend: EmbedBackend = Field(
        default=EmbedBackend.AUTO,
        description="auto: Cohere when a Cohere key is set, else an OpenAI-compatible server when "
        "KBUS_EMBEDDER_OPENAI_URL is set, else the local model.",
    )
    model: str = Field(
        default="all-MiniLM-L6-v2",
        description="A packaged model (all-MiniLM-L6-v2, -q8: int8 on load, -int8) or a directory "
        "with tokenizer.json and an ONNX or safetensors model. Why: "
        "docs/tuning.md#kbus_embedder_model.",
    )
    threads: int = Field(
        default=0,
        ge=0,
        description="Batches encoded at once, each on one core (0: one per core this process "
        "may use).",
    )
    query_threads: int = Field(
        default=0,
        ge=0,
        description="Cores a query's embedding runs on, in a session that never waits for "
        "document batches (0: every core; 1: none of its own). Why: "
        "docs/tuning.md#kbus_embedder_query_threads.",
    )
    batch_nice: int = Field(
        default=10,
        ge=0,
        le=19,
        description="Niceness added to the threads embedding documents (Linux) when queries have "
        "their own session: searches get the cores first while a backlog drains. Why 10: "
        "docs/tuning.md#kbus_embedder_batch_nice.",
    )
    batch_size: int = Field(
        default=4,
        gt=0,
        description="Texts per onnxruntime run at most (fewer where the next would pad it by "
        "over 2%). Why 4: docs/tuning.md#kbus_embedder_batch_size.",
    )
    gather: int = Field(
        default=64,
        gt=0,
        description="Texts gathered across chunks.ready messages into one model call, sorted by "
        "length. Why: docs/tuning.md#kbus_embedder_gather-and-kbus_embedder_flush_ms.",
    )
    flush_ms: float = Field(
        default=10.0,
        ge=0.0,
        description="Milliseconds a document's chunks wait for other messages' chunks to fill a "
        "model call.",
    )
    concurrency: int = Field(
        default=32,
        ge=1,
        description="chunks.ready messages held at once; their chunks share model calls. Why 32: "
        "docs/tuning.md#kbus_embedder_concurrency.",
    )
    request_concurrency: int = Field(
        default=8,
        ge=1,
        description="kb.embed requests answered at once. Local queries beyond the cores wait at "
        "the encoder; Cohere's network calls overlap.",
    )
    include_title: bool = Field(
        default=True, description="Embed a chunk as 'title / heading path / text'."
    )
    cache: bool = Field(
        default=True,
        description="Keep vectors in a JetStream KV bucket by model and text hash, so unchanged "
        "text is never embedded twice.",
    )
    cache_max_bytes: int = Field(
        default=1024**3, gt=0, description="Bytes the embedding cache bucket may hold."
    )
    token_states: bool = Field(
        default=True,
        description="Keep each chunk's token states (int8) in a JetStream KV bucket by model and "
        "text hash, for the local reranker to score without encoding again. Why: "
        "docs/tuning.md#kbus_embedder_token_states.",
    )
    token_states_max_bytes: int = Field(
        default=4 * 1024**3,
        gt=0,
        description="Bytes the token-state bucket may hold (reserved on the server); once full, "
        "the reranker encodes the candidates it finds no states for. Why: "
        "docs/tuning.md#kbus_embedder_token_states.",
    )
    cohere: CohereSettings = Field(default_factory=CohereSettings)
    openai: OpenAIEmbeddingSettings = Field(default_factory=OpenAIEmbeddingSettings)
