"""Reranker settings (env prefix ``KBUS_RERANKER_``)."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from kbus_runtime.chat import LLMSettings
from kbus_runtime.settings import CohereSettings, ServiceSettings
from pydantic import Field
from pydantic_settings import SettingsConfigDict


class RerankBackend(StrEnum):
    """The second-stage scorers (made by :data:`kbus_reranker.scoring.BACKENDS`)."""

    AUTO = "auto"
    COHERE = "cohere"
    MAXSIM = "maxsim"
    ENCODER = "encoder"
    E5 = "e5"


class RerankerSettings(ServiceSettings):
    """Which second-stage scorer runs, and how its score is combined with the first stage's."""

    model_config = SettingsConfigDict(env_prefix="KBUS_RERANKER_", extra="ignore")

    http_port: int = Field(default=8104, description="Port of /health and /metrics.")
    backend: RerankBackend = Field(
        default=RerankBackend.AUTO,
        description="auto: Cohere with a Cohere key, else maxsim (MaxSim over an encoder's token "
        "states); e5 or encoder by name. Why: docs/tuning.md#kbus_reranker_backend.",
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
    llm: LLMSettings = Field(default_factory=LLMSettings)
