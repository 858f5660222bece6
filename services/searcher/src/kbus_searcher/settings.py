"""Searcher settings (env prefix ``KBUS_SEARCHER_``)."""

from __future__ import annotations

from typing import Literal

from kbus_shared.settings import CohereSettings, ServiceSettings, StoreSettings
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from kbus_searcher.store import DEFAULT_FLAT_SEARCH_CUTOFF


class SearcherSettings(ServiceSettings):
    """Search defaults, the store, and the timeouts of the stages the searcher calls."""

    model_config = SettingsConfigDict(env_prefix="KBUS_SEARCHER_", extra="ignore")

    http_port: int = Field(default=8103, description="Port of /health and /metrics.")
    store: StoreSettings = Field(default_factory=StoreSettings)
    alpha: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Weight of the vector score in hybrid fusion (tuned on SciFact train).",
    )
    k: int = Field(default=5, ge=1, le=50, description="Results per search unless asked.")
    overfetch_min: int = Field(default=20, ge=1, description="Candidates fetched at least.")
    overfetch_factor: int = Field(default=4, ge=1, description="Candidates fetched per result.")
    min_score: float = Field(default=0.0, ge=0.0, description="Default floor on the final score.")
    min_similarity: float = Field(
        default=0.33,
        ge=-1.0,
        le=1.0,
        description="no_match when the best candidate's cosine similarity is lower (calibrated "
        "for all-MiniLM-L6-v2 on SciFact train, fp32 and q8; set it again for another model; -1 "
        "turns it off).",
    )
    rewriter: Literal["none", "cohere"] = Field(
        default="none", description="Query rewriter: none, or cohere (needs KBUS_COHERE_API_KEY)."
    )
    rewrite: bool = Field(
        default=True, description="Rewrite queries when a rewriter is configured, unless asked not."
    )
    cohere: CohereSettings = Field(default_factory=CohereSettings)
    rerank_depth: int = Field(
        default=5,
        ge=1,
        description="Candidates (first-stage order) the reranker scores; the rest follow them "
        "in first-stage order. With the local MaxSim re-scorer, 5 gained +0.007 nDCG@10 on "
        "SciFact train and 10 +0.009 at almost twice the time (about 250 against 430 ms on two "
        "cores); 5 keeps a search's p50 under 350 ms.",
    )
    rerank: bool = Field(
        default=True,
        description="Rerank when a request does not say. A request that did not ask for it "
        "gets first-stage order (reranker empty in the reply) if no reranker answers.",
    )
    embed_timeout_s: float = Field(default=10.0, gt=0, description="Wait for the embedder.")
    rerank_timeout_s: float = Field(default=15.0, gt=0, description="Wait for the reranker.")
    search_concurrency: int = Field(
        default=32,
        ge=1,
        description="Searches one searcher answers at once; more wait in its subscription. "
        "A search spends most of its time waiting for the embedder, Weaviate and the reranker, "
        "so others go on meanwhile.",
    )
    index: bool = Field(default=True, description="Run the indexing consumer in this process.")
    index_concurrency: int = Field(
        default=16,
        ge=1,
        description="embeddings.ready messages the indexer holds at once, the most it writes "
        "in one batch. Those that arrive while a batch is written form the next batch: one "
        "Weaviate query, write and delete for all of its documents. Draining a backlog of "
        "1,000 documents, 64 used 1.18 ms of CPU per chunk and 138 MB at peak, 16 used 1.44 ms "
        "and 127 MB, 8 used 1.42 ms and 126 MB.",
    )
    index_linger_ms: float = Field(
        default=5.0,
        ge=0.0,
        description="How long a batch waits for more messages before it is written (unless "
        "full). The embedder publishes a few documents at a time: in the pipeline 5 ms made "
        "batches of 2.4 documents instead of 1.4 and cut the indexer's CPU per chunk by about a "
        "fifth; 0 writes a lone document at once.",
    )
    flat_search_cutoff: int = Field(
        default=DEFAULT_FLAT_SEARCH_CUTOFF,
        ge=0,
        description="A search whose libraries (and filters) match fewer chunks than this "
        "compares the query with each of them (exact); a larger scope walks the HNSW graph. "
        "Applied to the collections at start-up. On SciFact's 19,979 chunks the graph answered "
        "the hybrid query 2.5 ms sooner than Weaviate's default of 40,000 with the same nDCG@10; "
        "below about 8,000 chunks comparing each is the faster.",
    )
    serve: bool = Field(default=True, description="Answer search requests in this process.")
