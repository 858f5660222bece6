"""Answering a search: embed the query, hybrid search, rerank, reply."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kbus_contract import (
    EmbedReply,
    EmbedRequest,
    ErrorReply,
    InputType,
    LibraryStats,
    NoMatchReason,
    RerankCandidate,
    RerankReply,
    RerankRequest,
    SearchHit,
    SearchReply,
    SearchRequest,
    SearchType,
    StageTimings,
    StatsReply,
    StatsRequest,
)
from kbus_contract.errors import PermanentError, TransientError
from kbus_contract.tenancy import require_granted, require_tenant
from kbus_contract.topology import Identity
from kbus_runtime.stage import Stage
from nats.errors import Error as NatsError
from prometheus_client import CollectorRegistry, Counter, Histogram
from weaviate.exceptions import WeaviateBaseError

from kbus_searcher.baseline import Baselines
from kbus_searcher.quotas import Quotas
from kbus_searcher.ranking import (
    best_per_document,
    first_stage,
    order,
    passage,
    rank,
    score_kind,
)
from kbus_searcher.relevance import Relevance, Verdict
from kbus_searcher.rewriting import QueryRewriter, rewrite_or_keep
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store import Candidate, ChunkStore, DocumentKey, Query
from kbus_searcher.store.queries import MAX_RESULT_WINDOW
from kbus_searcher.versions import Versions

log = logging.getLogger("kbus.searcher")

_DIMENSION_MISMATCH = re.compile(r"vector lengths|dimension", re.IGNORECASE)


def _document_key(candidate: Candidate) -> DocumentKey:
    return str(candidate.properties["library"]), str(candidate.properties["document_id"])


def _other_models(candidates: Sequence[Candidate], model: str) -> list[str]:
    if not model:
        return []  # keyword search: no vectors compared
    return sorted({str(c.properties.get("model")) for c in candidates} - {model})


def _refuse_other_models(candidates: Sequence[Candidate], model: str) -> None:
    """A query embedded by one model must not be compared with vectors of another."""
    others = _other_models(candidates, model)
    if others:
        raise PermanentError(
            f"the index holds vectors made by {', '.join(others)}, but this searcher embeds "
            f"queries with {model}: re-embed the library with {model}, or search with a "
            "searcher configured for the index's model (keyword search still works)",
            code="model_mismatch",
        )


class Searcher:
    """Answers ``kb.search`` requests."""

    def __init__(
        self,
        stage: Stage,
        store: ChunkStore,
        settings: SearcherSettings,
        registry: CollectorRegistry,
        versions: Versions,
        rewriter: QueryRewriter | None = None,
        quotas: Quotas | None = None,
    ) -> None:
        self.stage = stage
        self.store = store
        self.versions = versions
        self.settings = settings
        self.rewriter = rewriter
        self.quotas = quotas or Quotas({})
        self.searches = Counter(
            "kbus_tenant_searches", "Searches answered, by tenant", ["tenant"], registry=registry
        )
        self.baselines = Baselines(self._embed_probes, store.queries.best_cosine)
        self.relevance = Relevance(
            settings.min_evidence,
            settings.keyword_weight,
            settings.baseline_margin,
            store.queries.read_keywords,
            self.baselines.of,
        )
        self.latency = Histogram(
            "kbus_search_stage_seconds",
            "Search latency by stage",
            ["stage"],
            registry=registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )

    async def answer_search(self, body: bytes, subject: str) -> SearchReply | ErrorReply:
        """Answer one ``kb.search.{tenant}.{grant}`` request."""
        sent = self.stage.topology.identity(subject)
        return await self.stage.answer(
            body, SearchRequest, lambda req: self.search(req, sent), sent.tenant
        )

    async def answer_stats(self, body: bytes, subject: str) -> StatsReply | ErrorReply:
        """Answer one ``kb.stats.{tenant}.{grant}`` request."""
        sent = self.stage.topology.identity(subject)
        return await self.stage.answer(
            body, StatsRequest, lambda req: self.stats(req, sent), sent.tenant
        )

    async def stats(self, req: StatsRequest, sent: Identity) -> StatsReply:
        """Documents and chunks per library of a tenant (those its grant reaches)."""
        require_tenant(sent, req.tenant)
        granted = sent.libraries()
        try:
            rows = await self.store.queries.library_stats(req.tenant)
        except WeaviateBaseError as exc:
            raise TransientError(f"the store could not count: {exc}", code="store_error") from exc
        return StatsReply(
            tenant=req.tenant,
            libraries=tuple(
                LibraryStats(library=lib, documents=docs, chunks=chunks)
                for lib, docs, chunks in rows
                if granted is None or lib in granted
            ),
        )

    async def search(self, req: SearchRequest, sent: Identity) -> SearchReply:
        """Run a search request through every stage, for the tenant and grant of its subject."""
        require_tenant(sent, req.tenant)
        require_granted(sent, req.libraries)
        self.quotas.take_search(req.tenant)
        self.searches.labels(req.tenant).inc()
        run = _Run.start(req, self.settings)
        if not req.libraries:
            return self._reply(run, searched=False)
        run.query = await self._rewrite(req, run.timings)
        vector, run.model = await self._embed(run.query, req.search_type, run.timings)
        found = await self._same_model_candidates(req, run, vector)
        run.candidates = len(found)
        run.verdict = await self._judge(req, run, found)
        if run.verdict.reason is not None:
            return self._reply(run)
        firsts = first_stage(found, req.search_type, run.document_weight)
        positions = order(found, firsts)
        found, firsts = [found[i] for i in positions], [firsts[i] for i in positions]
        rerank_scores, run.reranker = await self._rerank(req, run, found, firsts)
        hits = rank(found, firsts, rerank_scores)
        hits = [h for h in hits if h.scores.final >= run.min_score]
        if req.group_by_document:
            hits = best_per_document(hits)
        run.hits = tuple(hits[: run.k])
        return self._reply(run)

    async def _judge(self, req: SearchRequest, run: _Run, found: list[Candidate]) -> Verdict:
        t0 = time.perf_counter()
        try:
            return await self.relevance.judge(req, run.query, run.model, found)
        except WeaviateBaseError as exc:
            raise TransientError(f"the store could not search: {exc}", code="store_error") from exc
        finally:
            run.timings["search_ms"] = run.timings.get("search_ms", 0.0) + self._observe(
                "relevance", t0
            )

    async def _rewrite(self, req: SearchRequest, timings: dict[str, float]) -> str:
        wanted = self.settings.rewrite if req.rewrite is None else req.rewrite
        if self.rewriter is None or not wanted:
            return req.query
        t0 = time.perf_counter()
        query = await rewrite_or_keep(self.rewriter, req.query)
        timings["rewrite_ms"] = self._observe("rewrite", t0)
        return query

    async def _embed(
        self, query: str, search_type: SearchType, timings: dict[str, float]
    ) -> tuple[list[float] | None, str]:
        if search_type is SearchType.KEYWORD:
            return None, ""
        t0 = time.perf_counter()
        reply = await self.stage.ask(
            self.stage.topology.embed,
            EmbedRequest(texts=(query,), input_type=InputType.QUERY),
            EmbedReply,
            stage="embedder",
            timeout_s=self.settings.embed_timeout_s,
        )
        timings["embed_ms"] = self._observe("embed", t0)
        return list(reply.vectors[0]), reply.model

    async def _embed_probes(self, texts: list[str]) -> tuple[str, list[list[float]]]:
        reply = await self.stage.ask(
            self.stage.topology.embed,
            EmbedRequest(texts=tuple(texts), input_type=InputType.QUERY),
            EmbedReply,
            stage="embedder",
            timeout_s=self.settings.embed_timeout_s,
        )
        return reply.model, [list(v) for v in reply.vectors]

    async def _same_model_candidates(
        self, req: SearchRequest, run: _Run, vector: list[float] | None
    ) -> list[Candidate]:
        """Candidates whose vectors the query's model made; anything else is refused.

        A mismatch may mean the index was switched to another model a moment ago: the alias is
        read again and, if it moved, the search runs once more on the new collection.
        """
        try:
            candidates = await self._candidates(req, run, vector)
        except PermanentError as exc:
            # A query vector whose length does not fit the collection.
            if exc.code != "model_mismatch" or not await self.store.collections.refresh_active():
                raise
        else:
            if not _other_models(candidates, run.model):
                return candidates
            if not await self.store.collections.refresh_active():
                _refuse_other_models(candidates, run.model)
                return candidates
        candidates = await self._candidates(req, run, vector)
        _refuse_other_models(candidates, run.model)
        return candidates

    async def _candidates(
        self, req: SearchRequest, run: _Run, vector: list[float] | None
    ) -> list[Candidate]:
        t0 = time.perf_counter()
        try:
            found = await self.store.queries.search(
                Query(
                    tenant=req.tenant,
                    libraries=req.libraries,
                    text=run.query,
                    vector=vector,
                    search_type=req.search_type,
                    alpha=run.alpha,
                    limit=self._fetch_size(run.k, req.group_by_document),
                    filters=dict(req.filters),
                    exclude_documents=req.exclude_documents,
                )
            )
            return await self._searchable(req.tenant, found)
        except WeaviateBaseError as exc:
            if _DIMENSION_MISMATCH.search(str(exc)):
                raise PermanentError(
                    f"the query vector does not fit the index ({exc}): the index was embedded "
                    "by another model",
                    code="model_mismatch",
                ) from exc
            raise TransientError(f"the store could not search: {exc}", code="store_error") from exc
        except NatsError as exc:
            raise TransientError(f"the versions bucket: {exc}", code="bus_error") from exc
        finally:
            run.timings["search_ms"] = self._observe("search", t0)

    async def _searchable(self, tenant: str, candidates: list[Candidate]) -> list[Candidate]:
        """Only chunks of each document's searchable version (never half of a replacement)."""
        seen: dict[DocumentKey, set[str]] = {}
        for c in candidates:
            seen.setdefault(_document_key(c), set()).add(str(c.properties["version"]))
        versions = await self.versions.searchable(tenant, seen)
        return [
            c
            for c in candidates
            if versions.get(_document_key(c), c.properties["version"]) == c.properties["version"]
        ]

    def _fetch_size(self, k: int, by_document: bool) -> int:
        # A document has several chunks: grouping needs more candidates for k documents.
        factor = self.settings.overfetch_factor * (2 if by_document else 1)
        return min(MAX_RESULT_WINDOW, max(self.settings.overfetch_min, factor * k))

    async def _rerank(
        self, req: SearchRequest, run: _Run, found: Sequence[Candidate], firsts: Sequence[float]
    ) -> tuple[list[float] | None, str]:
        wanted = self.settings.rerank if req.rerank is None else req.rerank
        if not (wanted and found):
            return None, ""
        depth = req.rerank_depth or self.settings.rerank_depth
        blend = req.search_type is not SearchType.KEYWORD
        candidates = tuple(
            RerankCandidate(id=c.uuid, text=passage(c), prior=first if blend else None)
            for c, first in zip(found[:depth], firsts, strict=False)
        )
        t0 = time.perf_counter()
        try:
            reply = await self.stage.ask(
                self.stage.topology.rerank,
                RerankRequest(query=run.query, candidates=candidates),
                RerankReply,
                stage="reranker",
                timeout_s=self.settings.rerank_timeout_s,
            )
        except TransientError as exc:
            if req.rerank:
                raise
            # Reranking is a refinement the caller did not ask for: first-stage order, and the
            # reply's empty `reranker` and `score_kind` say so.
            log.warning("answering in first-stage order: %s", exc)
            return None, ""
        finally:
            run.timings["rerank_ms"] = self._observe("rerank", t0)
        return list(reply.scores), reply.model

    def _observe(self, stage: str, t0: float) -> float:
        elapsed = time.perf_counter() - t0
        self.latency.labels(stage).observe(elapsed)
        return elapsed * 1000.0

    def _reply(self, run: _Run, searched: bool = True) -> SearchReply:
        run.timings["total_ms"] = self._observe("total", run.started)
        req = run.request
        return SearchReply(
            results=run.hits,
            searched=searched,
            no_match=searched and not run.hits,
            no_match_reason=run.no_match_reason(searched),
            candidates=run.candidates,
            search_type=req.search_type,
            alpha=run.alpha,
            min_score=run.min_score,
            min_similarity=run.verdict.min_similarity,
            min_evidence=run.verdict.min_evidence,
            best_similarity=run.verdict.best_similarity,
            baseline_similarity=run.verdict.baseline_similarity,
            keyword_coverage=run.verdict.keyword_coverage,
            evidence=run.verdict.evidence,
            document_weight=run.document_weight,
            query=run.query or req.query,
            score_kind=score_kind(req.search_type, bool(run.reranker), run.document_weight),
            model=run.model,
            reranker=run.reranker,
            timings=StageTimings(**run.timings),
        )


@dataclass
class _Run:
    """What one search has found out so far; becomes the reply."""

    request: SearchRequest
    started: float
    k: int
    alpha: float
    min_score: float
    document_weight: float
    verdict: Verdict = field(default_factory=Verdict)
    query: str = ""
    model: str = ""
    reranker: str = ""
    candidates: int = 0
    hits: tuple[SearchHit, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)

    @classmethod
    def start(cls, req: SearchRequest, settings: SearcherSettings) -> _Run:
        """A run with the request's choices, the server's defaults where it made none."""

        def chosen(value: float | None, default: float) -> float:
            return default if value is None else value

        return cls(
            req,
            time.perf_counter(),
            k=req.k or settings.k,
            alpha=chosen(req.alpha, settings.alpha),
            min_score=chosen(req.min_score, settings.min_score),
            document_weight=settings.document_weight,
        )

    def no_match_reason(self, searched: bool) -> NoMatchReason | None:
        """Why the reply holds no hit, if the search ran and found none."""
        if not searched or self.hits:
            return None
        return self.verdict.reason or NoMatchReason.BELOW_MIN_SCORE
