"""Reranker settings (env prefix ``KBUS_RERANKER_``)."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from kbus_runtime.chat import LLMSettings
from kbus_runtime.settings import DEPLOY, CohereSettings, ServiceSettings
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class RerankBackend(StrEnum):
    """The second-stage scorers (made by :data:`kbus_reranker.scoring.BACKENDS`)."""

    AUTO = "auto"
    COHERE = "cohere"
    ENDPOINT = "endpoint"
    MAXSIM = "maxsim"
    ENCODER = "encoder"
    E5 = "e5"


class RerankEndpointSettings(BaseSettings):
    """A rerank server (env prefix ``KBUS_RERANKER_ENDPOINT_``): Cohere's ``/rerank`` shape
    (Infinity, vLLM, Jina, llama.cpp's server, Cohere-compatible gateways) or Text Embeddings
    Inference's."""

    model_config = SettingsConfigDict(env_prefix="KBUS_RERANKER_ENDPOINT_", extra="ignore")

    url: str | None = Field(
        json_schema_extra=DEPLOY,
        default=None,
        description="Base URL, ending before /rerank (such as http://infinity:7997/v1); with it "
        "set and no Cohere key, auto reranks there.",
    )
    model: str = Field(default="", description="Model name sent with each call (if any).")
    api_key: SecretStr | None = Field(
        json_schema_extra=DEPLOY,
        default=None,
        description="Bearer token for the server (secret), if it wants one.",
    )
    api: Literal["cohere", "tei"] = Field(
        default="cohere",
        description="cohere: documents in, results with relevance_score out; tei: Text "
        "Embeddings Inference's texts in, a list of scores out.",
    )
    timeout_s: float = Field(default=10.0, gt=0, description="Timeout of one call, seconds.")
    rate_limit_wait_s: float = Field(
        default=2.0,
        ge=0.0,
        description="Seconds a call waits out 429 answers before the search goes on unreranked "
        "(a search cannot wait long).",
    )


class RerankerSettings(ServiceSettings):
    """Which second-stage scorer runs, and how its score is combined with the first stage's."""

    model_config = SettingsConfigDict(env_prefix="KBUS_RERANKER_", extra="ignore")

    http_port: int = Field(default=8104, description="Port of /health and /metrics.")
    backend: RerankBackend = Field(
        default=RerankBackend.AUTO,
        description="auto: Cohere with a Cohere key, else a rerank server when its URL is set, "
        "else maxsim; e5 or encoder by name. Why: docs/tuning.md#kbus_reranker_backend.",
    )
    model_path: str = Field(
        default="",
        description="maxsim or encoder: a model name or directory (default all-MiniLM-L6-v2).",
    )
    threads: int = Field(
        default=0,
        ge=0,
        description="Cores for the model (0: all): the local encoders run that many batches "
        "at once, one core each; the other scorers use that many threads.",
    )
    request_concurrency: int = Field(
        default=8,
        ge=1,
        description="kb.rerank requests answered at once. A local model scores one request at "
        "a time on every core (the others wait their turn); Cohere's calls overlap.",
    )
    max_candidates: int = Field(default=200, gt=0, description="Larger requests are refused.")
    token_states: bool = Field(
        default=True,
        description="maxsim: read the candidates' token states from the embedder's bucket (same "
        "model) instead of encoding them; false: encode every candidate. Why: "
        "docs/tuning.md#kbus_embedder_token_states.",
    )
    query_states: bool = Field(
        default=True,
        description="maxsim: score with the query's token states the embedder sent with its "
        "vector (same model), so a search runs no encoder; false: encode the query. Why: "
        "docs/tuning.md#kbus_reranker_query_states.",
    )
    prompted: Literal["cohere", "openai"] | None = Field(
        default=None,
        description="Chat model of the prompted reranker profiles may name: cohere, or openai "
        "(KBUS_LLM_URL); unset: those searches keep first-stage order, degraded.",
    )
    prompted_concurrency: int = Field(
        default=4,
        ge=1,
        description="Model calls one prompted rerank makes at once (one per candidate); a local "
        "llama.cpp server answers one at a time whatever this is.",
    )
    prompted_passage_chars: int = Field(
        default=1_500,
        ge=100,
        description="Characters of each passage the prompted reranker's model reads (a chunk "
        "is about 512; more only slows a small model down).",
    )
    cohere: CohereSettings = Field(default_factory=CohereSettings)
    endpoint: RerankEndpointSettings = Field(default_factory=RerankEndpointSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
