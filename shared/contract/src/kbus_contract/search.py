"""A search for the knowledge base (``kb.search``) and its answer."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator, model_validator

from kbus_contract.base import (
    MAX_QUERY_CHARS,
    Contract,
    Metadata,
    MetadataScalar,
    budget_field,
)
from kbus_contract.identifiers import MAX_CLAIMED, DocumentId, LibraryId, Principal, TenantId
from kbus_contract.passages import MAX_BUDGET_TOKENS, MIN_BUDGET_TOKENS, Context, Expand
from kbus_contract.profiles import TransformerKind

MAX_K = 100


class SearchType(StrEnum):
    """How candidates are found."""

    HYBRID = "hybrid"
    VECTOR = "vector"
    KEYWORD = "keyword"


class SearchRequest(Contract):
    """A question for the knowledge base (``kb.search``)."""

    tenant: TenantId
    libraries: tuple[LibraryId, ...] = Field(max_length=100)
    query: str = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="The question; its first tokens make its vector, keyword search reads all "
        "of it.",
    )
    k: int | None = Field(
        default=None,
        ge=1,
        le=MAX_K,
        description="Results to return (the server's default if unset).",
    )
    search_type: SearchType = SearchType.HYBRID
    alpha: float | None = Field(default=None, ge=0.0, le=1.0)
    min_score: float | None = Field(
        default=None, ge=0.0, description="Drop hits whose final score is lower."
    )
    min_similarity: float | None = Field(
        default=None,
        ge=-1.0,
        le=1.0,
        description="Answer no_match when even the best candidate's cosine similarity to the "
        "query is lower, instead of the server's evidence rule (vector and hybrid search; -1: "
        "never answer no_match for want of similarity).",
    )
    min_evidence: float | None = Field(
        default=None,
        description="Answer no_match when the relevance evidence (best similarity plus the "
        "weighted keyword coverage) is lower (the server's default if unset; -1: off).",
    )
    rewrite: bool | None = Field(
        default=None,
        description="Rewrite the query before searching, if a rewriter is configured "
        "(the server's default if unset).",
    )
    transformer: TransformerKind | None = Field(
        default=None,
        description="What the query becomes before it is searched: none, question, or prompt "
        "(the libraries' own prompt); unset: the libraries' profile, else the server's default. "
        "rewrite false means none.",
    )
    rerank: bool | None = Field(
        default=None,
        description="Re-score the first candidates with the reranker (true: or fail; unset: the "
        "server's default, on, falling back to first-stage order if no reranker answers).",
    )
    rerank_depth: int | None = Field(
        default=None,
        ge=1,
        le=50,
        description="How many first-stage candidates the reranker re-scores (the server's "
        "default if unset). Deeper can rank better and costs time per candidate.",
    )
    group_by_document: bool = Field(
        default=False,
        description="Return each document once, at the rank of its best chunk; k counts documents.",
    )
    exclude_documents: tuple[DocumentId, ...] = Field(
        default=(), max_length=100, description="Document ids that must not be returned."
    )
    principals: tuple[Principal, ...] = Field(
        default=(),
        max_length=MAX_CLAIMED,
        description="Whom the caller acts for (a person's user and groups, as the sources name "
        "them): documents with access are returned only when it names one of these. The "
        "credential bounds what it may claim (principal_not_granted).",
    )
    filters: dict[str, MetadataScalar | tuple[MetadataScalar, ...]] = Field(
        default_factory=dict,
        max_length=32,
        description="Equality on top-level metadata keys; a list means any of its values.",
    )
    budget_ms: int | None = budget_field(
        " (the server's default if unset). Each stage gets what is left; the reranker is "
        "skipped when it would not fit (degraded), and no work goes on past it"
    )
    budget_tokens: int | None = Field(
        default=None,
        ge=MIN_BUDGET_TOKENS,
        le=MAX_BUDGET_TOKENS,
        description="The context the caller can afford, in tokens of the reply's tokenizer: "
        "the reply's `context` then holds passages that fill it in rank order (unset: no "
        "context, the reply as without it).",
    )
    expand: Expand = Field(
        default=Expand.NONE,
        description="What a passage holds around each hit: none (the hit), neighbours (the "
        "chunks before and after it), section (its heading-path section, else its page), "
        "document (the whole document). Needs budget_tokens.",
    )
    adaptive: bool = Field(
        default=False,
        description="Add passages while their scores stay above a cut relative to the best "
        "hit (the reply's context.cut explains it) instead of up to k. Needs budget_tokens.",
    )
    cursor: str | None = Field(
        default=None,
        max_length=16_384,
        description="The context.cursor of an earlier reply to this same search: the passages "
        "after those it gave. Needs budget_tokens.",
    )

    @field_validator("query")
    @classmethod
    def _query_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is empty or whitespace only")
        return value

    @model_validator(mode="after")
    def _context_needs_budget(self) -> SearchRequest:
        asked = [
            name
            for name, given in (
                ("expand", self.expand is not Expand.NONE),
                ("adaptive", self.adaptive),
                ("cursor", self.cursor is not None),
            )
            if given
        ]
        if asked and self.budget_tokens is None:
            raise ValueError(f"{', '.join(asked)} shapes the context: give budget_tokens too")
        return self


class Scores(Contract):
    """Every score that placed a hit, each named for what it is.

    ``keyword`` is the raw BM25 score; ``vector`` the cosine similarity of query and chunk;
    ``fused`` the hybrid score ``alpha*norm(vector) + (1-alpha)*norm(keyword)`` over the
    min-max-normalised candidate lists (0..1, relative to this result set); ``document`` the
    cosine similarity of the query and the chunk's document (the mean of its chunk vectors);
    ``first_stage`` what the first stage ordered by: ``fused`` (hybrid) or ``vector`` blended
    with the document score, min-max normalised over the candidates, at the weight
    ``SearchReply.document_weight`` (``bm25`` in keyword search); ``rerank`` the reranker's score
    (``SearchReply.reranker`` names it; ``+prior(w)`` means its normalised score blended with
    weight ``w`` of the first stage's); ``final`` is the score the hits are ordered by and that
    ``min_score`` is applied to (``SearchReply.score_kind`` says which).
    """

    keyword: float | None = None
    vector: float | None = None
    fused: float | None = None
    document: float | None = None
    first_stage: float | None = None
    rerank: float | None = None
    final: float


class SearchHit(Contract):
    """One chunk in a search reply."""

    chunk_id: str
    document_id: str
    library: str
    title: str
    text: str
    heading_path: tuple[str, ...]
    source_uri: str
    char_start: int
    char_end: int
    position: int
    page: int | None = None
    version: str
    metadata: Metadata
    scores: Scores
    matched: str | None = Field(
        default=None,
        description="The chunk's matching text (a question, a description) that placed it "
        "best, when that was not the chunk's own text.",
    )


class NoMatchReason(StrEnum):
    """Why a search that ran answered no_match."""

    NO_CANDIDATES = "no_candidates"
    WEAK_EVIDENCE = "weak_evidence"
    BELOW_MIN_SIMILARITY = "below_min_similarity"
    BELOW_MIN_SCORE = "below_min_score"


class DegradedReason(StrEnum):
    """What a degraded answer left out to be given at all, or within its budget."""

    RERANK_OVER_BUDGET = "rerank_over_budget"
    RERANK_TIMEOUT = "rerank_timeout"
    RERANK_UNAVAILABLE = "rerank_unavailable"
    REWRITE_FAILED = "rewrite_failed"
    REWRITE_UNAVAILABLE = "rewrite_unavailable"
    RERANK_MALFORMED = "rerank_malformed"


class StageTimings(Contract):
    """Milliseconds spent in each stage of one search."""

    queued_ms: float = Field(
        default=0.0,
        description="Waiting at the searcher for its turn, before the search began (not in "
        "total_ms).",
    )
    rewrite_ms: float = 0.0
    embed_ms: float = 0.0
    search_ms: float = 0.0
    rerank_ms: float = 0.0
    context_ms: float = 0.0
    total_ms: float = 0.0


class SearchWork(Contract):
    """What a search cost, in the unit of the tenant's search budgets: an ordinary search (k=5,
    a short query, the default reranking, no context) costs about 1 (docs/searching.md, "What a
    search costs")."""

    estimate: float = Field(description="Its work estimated from the request, before it ran.")
    measured: float = Field(description="Its work from what it read and scored (charged).")
    read: int = Field(description="Objects read from the store: candidates, context chunks.")
    reranked: int = Field(description="Candidates the reranker scored.")
    query_tokens: int = Field(description="The query's tokens, as embedded and scored.")


class SearchReply(Contract):
    """The answer to a :class:`SearchRequest`."""

    kind: Literal["search_results"] = "search_results"
    results: tuple[SearchHit, ...]
    searched: bool = Field(description="False when the request named no library: nothing was run.")
    no_match: bool = Field(
        description="True when the search ran but found nothing relevant enough; "
        "no_match_reason says why."
    )
    no_match_reason: NoMatchReason | None = Field(
        default=None,
        description="no_candidates: the store found none; weak_evidence: the best similarity "
        "is not well above the baseline and the evidence is under min_evidence; "
        "below_min_similarity: the best cosine is under the request's "
        "min_similarity; below_min_score: no hit scored min_score.",
    )
    candidates: int = Field(description="How many candidates the store returned before reranking.")
    search_type: SearchType
    alpha: float
    min_score: float
    min_similarity: float | None = Field(
        default=None,
        description="The request's cosine floor, when it set one (it replaces the evidence rule).",
    )
    min_evidence: float | None = Field(
        default=None,
        description="The evidence floor applied (None where no_match was not decided by it).",
    )
    best_similarity: float | None = Field(
        default=None,
        description="The highest cosine similarity of any candidate to the query: how close "
        "the library came to the question.",
    )
    baseline_similarity: float | None = Field(
        default=None,
        description="How close unrelated questions come to these libraries: the median best "
        "cosine of kbus's probe questions (computed when the similarity alone does not decide).",
    )
    keyword_coverage: float | None = Field(
        default=None,
        description="The largest share of the query's content words that the keyword text of "
        "one of the candidates keyword search scored highest holds (computed when the "
        "similarity alone does not decide).",
    )
    evidence: float | None = Field(
        default=None,
        description="best_similarity + keyword_weight * keyword_coverage: what min_evidence "
        "is held against (a search whose best_similarity stands baseline_margin above "
        "baseline_similarity is answered whatever its evidence).",
    )
    document_weight: float = Field(
        default=0.0, description="Weight of the document score in the first stage's order."
    )
    query: str = Field(default="", description="The query searched (after any rewriting).")
    transformer: str = Field(
        default="none",
        description="The transformer that turned the request's query into `query`, as "
        "kind:backend/model (question:openai/SmolLM2-135M-Instruct), or none: none was wanted, "
        "or it failed (then degraded).",
    )
    score_kind: str = Field(
        description="What `scores.final` is: rerank (the reranker's score), first_stage (fused "
        "or cosine blended with the document score), fused (relative hybrid score, 0..1), "
        "cosine (vector similarity) or bm25 (raw keyword score)."
    )
    model: str
    reranker: str
    degraded: bool = Field(
        default=False,
        description="True when a refinement the search would have made was left out; "
        "degraded_reason says which.",
    )
    degraded_reason: DegradedReason | None = Field(
        default=None,
        description="rerank_over_budget: what was left of the budget was less than the "
        "reranker needs, so the first stage's order was kept; rerank_timeout: the reranker did "
        "not answer within what was left; rerank_unavailable: no reranker answered (or none can "
        "score as the library's profile asks); rerank_malformed: the prompted reranker's model "
        "answered in another form than asked; rewrite_failed: the transformer failed, was slow "
        "or answered in another form, so the query was searched as written; "
        "rewrite_unavailable: a transformer was wanted but the searcher has no model for it.",
    )
    budget_ms: int = Field(
        default=0, description="The budget the search ran under, in milliseconds."
    )
    tries: int = Field(
        default=1,
        ge=1,
        description="How many times the client sent this search: it asks again after a "
        "retryable error or no responders while its wait allows (set by the client).",
    )
    timings: StageTimings
    context: Context | None = Field(
        default=None, description="The passages, when the search gave budget_tokens."
    )
    work: SearchWork | None = Field(
        default=None, description="What the search cost (absent: it was not run)."
    )
