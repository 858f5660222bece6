"""Searcher settings (env prefix ``KBUS_SEARCHER_``)."""

from __future__ import annotations

from typing import Literal

from kbus_contract import MAX_BUDGET_MS, MAX_K
from kbus_contract.wire import DEFAULT_WAIT_S
from kbus_runtime.chat import LLMSettings
from kbus_runtime.settings import CohereSettings, ServiceSettings, StoreSettings
from pydantic import Field
from pydantic_settings import SettingsConfigDict

#: The tokenizer a package ships (all-MiniLM-L6-v2's WordPiece), used unless another is set.
DEFAULT_TOKENIZER = "all-MiniLM-L6-v2"


class SearcherSettings(ServiceSettings):
    """Search defaults, the store, and the timeouts of the stages the searcher calls."""

    model_config = SettingsConfigDict(env_prefix="KBUS_SEARCHER_", extra="ignore")

    http_port: int = Field(default=8103, description="Port of /health and /metrics.")
    store: StoreSettings = Field(default_factory=StoreSettings)
    alpha: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Weight of the vector score in hybrid fusion, 0 to 1. Why 0.5: "
        "docs/tuning.md#kbus_searcher_alpha.",
    )
    k: int = Field(default=5, ge=1, le=MAX_K, description="Results per search unless asked.")
    overfetch_min: int = Field(
        default=20, ge=1, description="Candidates fetched at least (over-fetch for fusion)."
    )
    overfetch_factor: int = Field(
        default=4, ge=1, description="Candidates fetched per result asked for."
    )
    min_score: float = Field(default=0.0, ge=0.0, description="Default floor on the final score.")
    min_evidence: float = Field(
        default=0.6,
        ge=-1.0,
        description="no_match when best similarity + keyword_weight * keyword coverage is lower "
        "(-1: off). Why 0.6: docs/tuning.md#kbus_searcher_min_evidence.",
    )
    baseline_margin: float = Field(
        default=0.25,
        description="A search is answered when its best cosine stands this far above the "
        "libraries' baseline. Why 0.25: docs/tuning.md#kbus_searcher_min_evidence.",
    )
    keyword_weight: float = Field(
        default=0.5,
        ge=0.0,
        description="Weight of the share of the query's terms a candidate holds in the no_match "
        "evidence. Why 0.5: docs/tuning.md#kbus_searcher_min_evidence.",
    )
    document_weight: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="Weight of the document's vector beside the chunk's in the first stage's "
        "order (0: chunks alone). Why 0.1: docs/tuning.md#kbus_searcher_document_weight.",
    )
    rewriter: Literal["none", "cohere", "openai"] = Field(
        default="none",
        description="Chat model of the query transformers profiles and requests name: none, "
        "cohere, or openai (KBUS_LLM_URL). Why none: docs/quality.md#query-rewriting.",
    )
    rewrite: bool = Field(
        default=False,
        description="Turn queries into questions (with the rewriter) when neither the request "
        "nor the libraries' profiles choose a transformer. Why off: "
        "docs/quality.md#query-rewriting.",
    )
    cohere: CohereSettings = Field(default_factory=CohereSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    rerank_depth: int = Field(
        default=5,
        ge=1,
        description="First-stage candidates the reranker scores; the rest follow in first-stage "
        "order. Why 5: docs/tuning.md#kbus_searcher_rerank_depth.",
    )
    rerank_prior_weight: float = Field(
        default=0.6,
        ge=0.0,
        le=1.0,
        description="Weight of the first-stage score against the reranker's normalised score (0: "
        "the reranker's own score). Why 0.6: docs/tuning.md#kbus_searcher_rerank_prior_weight.",
    )
    rerank: bool = Field(
        default=True,
        description="Rerank when a request does not say. A request that did not ask for it "
        "gets first-stage order (reranker empty in the reply) if no reranker answers.",
    )
    budget_ms: int = Field(
        default=int(DEFAULT_WAIT_S * 1000),
        ge=1,
        le=MAX_BUDGET_MS,
        description="Milliseconds a search may take when its request sets no budget_ms: the "
        "client's default wait. Why: docs/tuning.md#kbus_searcher_budget_ms.",
    )
    reserve_ms: int = Field(
        default=50,
        ge=0,
        description="Milliseconds of a budget kept back to answer after a stage is cut short. "
        "Why 50: docs/tuning.md#kbus_searcher_budget_ms.",
    )
    embed_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Seconds a search waits for the embedder at most (less when its budget "
        "has less left).",
    )
    rerank_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Seconds a search waits for the reranker at most (less when its budget "
        "has less left).",
    )
    store_timeout_s: float = Field(
        default=2.5,
        gt=0,
        description="Seconds a search waits for the store's query at most; past it the search "
        "fails with a retryable store_error. Why: docs/reliability.md#the-schemas-raft-leader.",
    )
    rewrite_timeout_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds a search waits for the query rewriter at most before searching "
        "the query as given.",
    )
    search_concurrency: int = Field(
        default=32,
        ge=1,
        description="Searches one searcher answers at once (more wait). A search mostly waits for "
        "the embedder, Weaviate and the reranker, so others go on meanwhile.",
    )
    index: bool = Field(default=True, description="Run the indexing consumer in this process.")
    index_concurrency: int = Field(
        default=16,
        ge=1,
        description="embeddings.ready messages the indexer holds at once. Why 16: "
        "docs/tuning.md#kbus_searcher_index_concurrency.",
    )
    index_batch_chunks: int = Field(
        default=256,
        ge=1,
        description="Chunks the indexer writes in one batch at most: another tenant's document "
        "waits one batch at most. Why 256: docs/tuning.md#kbus_searcher_index_batch_chunks.",
    )
    sync_concurrency: int = Field(
        default=8,
        ge=1,
        description="Syncs (document.synced) applied at once. Each takes effect at its own "
        "stream sequence, so their order of processing changes nothing; a sync waiting for its "
        "listed documents holds one of these.",
    )
    sync_settle_max_s: float = Field(
        default=600.0,
        ge=0.0,
        description="The longest a sync waits for its listed documents, whatever it asks "
        "(settle_s): a tenant's syncs cannot hold the syncer longer.",
    )
    index_linger_ms: float = Field(
        default=5.0,
        ge=0.0,
        description="Milliseconds a batch waits for more messages before it is written (unless "
        "full; 0: at once). Why 5: docs/tuning.md#kbus_searcher_index_linger_ms.",
    )
    flat_search_cutoff: int = Field(
        default=10_000,
        ge=0,
        description="Chunks in a search's scope below which each is compared (exact); above, the "
        "HNSW graph is walked. Why 10,000: docs/tuning.md#kbus_searcher_flat_search_cutoff.",
    )
    serve: bool = Field(default=True, description="Answer search requests in this process.")
    context_tokenizer: str = Field(
        default=DEFAULT_TOKENIZER,
        description="What a context's budget_tokens are counted with: all-MiniLM-L6-v2 (the "
        "WordPiece tokenizer a package ships), or a tokenizer.json path (the agent model's own).",
    )
    adaptive_drop: float = Field(
        default=0.5,
        gt=0.0,
        le=1.0,
        description="An adaptive context keeps hits scoring at least the best's score less this "
        "share of its spread to the last candidate's. Why: "
        "docs/tuning.md#kbus_searcher_adaptive_drop.",
    )
