"""Searcher settings (env prefix ``KBUS_SEARCHER_``)."""

from __future__ import annotations

from kbus_shared.settings import ServiceSettings, StoreSettings
from pydantic import Field
from pydantic_settings import SettingsConfigDict


class SearcherSettings(ServiceSettings):
    """Search defaults, the store, and the timeouts of the stages the searcher calls."""

    model_config = SettingsConfigDict(env_prefix="KBUS_SEARCHER_", extra="ignore")

    http_port: int = Field(default=8103, description="Port of /health and /metrics.")
    store: StoreSettings = Field(default_factory=StoreSettings)
    alpha: float = Field(default=0.7, ge=0.0, le=1.0, description="Weight of the vector score.")
    k: int = Field(default=5, ge=1, le=50, description="Results per search unless asked.")
    overfetch_min: int = Field(default=20, ge=1, description="Candidates fetched at least.")
    overfetch_factor: int = Field(default=4, ge=1, description="Candidates fetched per result.")
    min_score: float = Field(default=0.0, ge=0.0, description="Default floor on the final score.")
    rerank_depth: int = Field(
        default=30,
        ge=1,
        description="Candidates (first-stage order) the reranker scores; the rest follow them "
        "in first-stage order.",
    )
    rerank: bool = Field(default=True, description="Ask the reranker unless a request says no.")
    embed_timeout_s: float = Field(default=10.0, gt=0, description="Wait for the embedder.")
    rerank_timeout_s: float = Field(default=15.0, gt=0, description="Wait for the reranker.")
    index: bool = Field(default=True, description="Run the indexing consumer in this process.")
    serve: bool = Field(default=True, description="Answer search requests in this process.")
