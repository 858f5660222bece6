"""Answering a search: embed the query, hybrid search, rerank, reply."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from kbus_contract import (
    BacklogReply,
    BacklogRequest,
    Context,
    DegradedReason,
    EmbedReply,
    EmbedRequest,
    ErrorReply,
    InputType,
    QueryStates,
    SearchesAnswered,
    SearchHit,
    SearchReply,
    SearchRequest,
    SearchType,
    StatsReply,
    StatsRequest,
    TransformerKind,
    VersionsReply,
    VersionsRequest,
)
from kbus_contract.backlog import tenant_backlog
from kbus_contract.tenancy import UNKNOWN, Identity, require_tenant
from kbus_runtime.answering import Inbound
from kbus_runtime.deadlines import Deadline
from kbus_runtime.stage import Stage
from kbus_runtime.tracing import annotate
from prometheus_client import CollectorRegistry, Counter, Histogram
from weaviate.exceptions import WeaviateBaseError

from kbus_searcher.search.baseline import Baselines
from kbus_searcher.search.blending import Blend, blended
from kbus_searcher.search.chains import chain_of
from kbus_searcher.search.context import ContextBuilder
from kbus_searcher.search.first_stage import FirstStage
from kbus_searcher.search.pricing import Pricing
from kbus_searcher.search.ranking import first_order
from kbus_searcher.search.readers import scope_of
from kbus_searcher.search.relevance import Relevance, Verdict
from kbus_searcher.search.replies import reply_of
from kbus_searcher.search.rewriting import QueryRewriter, rewrite_or_none
from kbus_searcher.search.runs import SearchRun
from kbus_searcher.search.second_stage import Reranked, SecondStage
from kbus_searcher.search.statistics import library_stats, versions
from kbus_searcher.search.tokens import TokenCounter
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.state.profiles import LibraryProfiles
from kbus_searcher.state.quotas import Quotas
from kbus_searcher.state.versions import Versions
from kbus_searcher.store import Candidate, ChunkStore, StoreView
from kbus_searcher.store.errors import failure, unavailable, within

log = logging.getLogger("kbus.searcher")


class Searcher:
    """Answers ``kb.search`` requests."""

    def __init__(
        self,
        stage: Stage,
        store: ChunkStore,
        settings: SearcherSettings,
        registry: CollectorRegistry,
        versions: Versions,
        profiles: LibraryProfiles,
        rewriter: QueryRewriter | None = None,
        quotas: Quotas | None = None,
    ) -> None:
        self.stage = stage
        self.store = store
        self.versions = versions
        self.profiles = profiles
        self.settings = settings
        self.rewriter = rewriter
        self.quotas = quotas or Quotas()
        self.pricing = Pricing(settings)
        self.second_stage = SecondStage(stage, settings)
        self.first_stage = FirstStage(store, versions, settings, self._observe)
        self.context = ContextBuilder(
            TokenCounter.load(settings.context_tokenizer), settings.adaptive_drop
        )
        self.searches = Counter(
            "kbus_tenant_searches", "Searches answered, by tenant", ["tenant"], registry=registry
        )
        self.degraded = Counter(
            "kbus_search_degraded",
            "Searches answered without a refinement (degraded), by reason",
            ["reason"],
            registry=registry,
        )
        self.baselines = Baselines(self._embed_probes)
        self.relevance = Relevance(
            settings.min_evidence,
            settings.keyword_weight,
            settings.baseline_margin,
            self.baselines.of,
        )
        self.latency = Histogram(
            "kbus_search_stage_seconds",
            "Search latency by stage",
            ["stage"],
            registry=registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )

    async def answer_search(self, inbound: Inbound) -> SearchReply | ErrorReply:
        """Answer one ``kb.search.{tenant}.{grant}`` request."""
        sent = self.stage.topology.identity(inbound.subject)

        async def search(req: SearchRequest) -> SearchReply:
            deadline = inbound.deadline(req.budget_ms, self.settings.budget_ms)
            queued_ms = (time.monotonic() - inbound.received) * 1000.0
            reply = await self.search(req, sent, deadline, inbound.work.estimate, queued_ms)
            if reply.work is not None:
                inbound.work.measured = reply.work.measured
            return reply

        return await self.stage.answer(inbound.body, SearchRequest, search, sent.tenant)

    def price(self, inbound: Inbound) -> float:
        """A ``kb.search`` request's work before it runs, charged to its tenant's budget of
        work a second: past it, the search is refused before it waits for a slot (one that is
        not a search costs one: its answer is the error)."""
        # The subject's tenant pays, whatever the body names (a body naming another tenant is
        # then refused as such: it never spends that tenant's budget).
        sent = self.stage.topology.identity(inbound.subject).tenant
        if sent is not None:
            self.quotas.check_search(sent)
        try:
            req = SearchRequest.model_validate_json(inbound.body)
        except ValueError:
            return 1.0
        estimate = self.pricing.estimate(req)
        if sent is not None:
            self.quotas.take_search(sent, estimate)
        return estimate

    async def answer_stats(self, inbound: Inbound) -> StatsReply | ErrorReply:
        """Answer one ``kb.stats.{tenant}.{grant}`` request."""
        sent = self.stage.topology.identity(inbound.subject)
        return await self.stage.answer(
            inbound.body,
            StatsRequest,
            lambda req: library_stats(self.store, req, sent),
            sent.tenant,
        )

    async def answer_backlog(self, inbound: Inbound) -> BacklogReply | ErrorReply:
        """Answer one ``kb.backlog.{tenant}.{grant}`` request: the tenant's own work per stage."""
        sent = self.stage.topology.identity(inbound.subject)

        async def backlog(req: BacklogRequest) -> BacklogReply:
            require_tenant(sent, req.tenant)
            js = self.stage.broker.connection.jetstream()
            return await tenant_backlog(js, self.stage.topology, req.tenant)

        return await self.stage.answer(inbound.body, BacklogRequest, backlog, sent.tenant)

    async def answer_versions(self, inbound: Inbound) -> VersionsReply | ErrorReply:
        """Answer one ``kb.versions.{tenant}.{grant}`` request."""
        sent = self.stage.topology.identity(inbound.subject)
        return await self.stage.answer(
            inbound.body, VersionsRequest, lambda req: versions(self.store, req, sent), sent.tenant
        )

    async def search(
        self,
        req: SearchRequest,
        sent: Identity,
        deadline: Deadline | None = None,
        estimate: float | None = None,
        queued_ms: float = 0.0,
    ) -> SearchReply:
        """Run a search request through every stage, for the tenant and grant of its subject,
        and stop when its caller's ``deadline`` (by default, the server's budget) comes. It is
        charged its ``estimate`` of work (:mod:`.pricing`) first (unless :meth:`price` did),
        what it measured once it ran."""
        scope = scope_of(sent, req.tenant, req.libraries, req.principals)
        if estimate is None:
            estimate = self.pricing.estimate(req)
            self.quotas.take_search(req.tenant, estimate)
        self.searches.labels(req.tenant).inc()
        deadline = deadline or Deadline.after(self.settings.budget_ms, time.monotonic())
        run = SearchRun.start(req, self.settings, deadline)
        run.timings["queued_ms"] = queued_ms
        if not req.libraries:
            return self._reply(run, searched=False)
        view = self.store.view(scope, estimate)
        # What is cut short inside still leaves half the reserve to send the error reply; the
        # store's writes wait meanwhile (store.pressure).
        pressure = self.store.writes.pressure
        with pressure.searching(req.tenant, estimate):
            if pressure.to_say():
                # Indexers apart from this process yield too (store.pressure).
                said = SearchesAnswered(in_flight=pressure.in_flight)
                subject = self.stage.topology.subject("search.pressure")
                await self.stage.broker.connection.publish(subject, said.model_dump_json().encode())
            async with deadline.bound("searching", self._reserve_s / 2):
                reply = await self._search(req, run, view)
        used = run.context.used_tokens if run.context is not None else 0
        query = run.query or req.query
        work = self.pricing.measured(estimate, run.candidates, view.read, used, run.reranked, query)
        self.quotas.settle_search(req.tenant, work.measured - estimate)
        return reply.model_copy(update={"work": work})

    async def _search(self, req: SearchRequest, run: SearchRun, view: StoreView) -> SearchReply:
        profiles = await self.profiles.of(req.tenant, req.libraries)
        run.chain = chain_of(req, profiles, self.settings.rewrite, self.settings.rerank)
        run.query = await self._rewrite(req, run)
        vector, run.model = await self._embed(run.query, req.search_type, run)
        found = await self.first_stage.candidates(req, run, vector, view, self._store_wait(run))
        run.candidates = len(found)
        run.verdict = await self._judge(req, run, found, view)
        if run.verdict.reason is not None:
            return self._reply(run)
        found, firsts = first_order(found, req.search_type, run.document_weight)
        reranked = await self._rerank(req, run, found)
        hits = blended(found, firsts, reranked.scores, reranked.model, self._blend(req, run))
        run.hits, run.reranker, run.score_kind = hits.hits, hits.reranker, hits.score_kind
        if req.budget_tokens is not None and hits.ranked:
            run.context = await self._context(req, run, hits.ranked, view)
        return self._reply(run)

    async def _context(
        self, req: SearchRequest, run: SearchRun, ranked: list[SearchHit], view: StoreView
    ) -> Context:
        t0 = time.perf_counter()
        try:
            built = self.context.build(req, run.query, ranked, view)
            return await within(built, self._store_wait(run))
        except WeaviateBaseError as exc:
            raise failure(exc, "read the context") from exc
        finally:
            run.timings["context_ms"] = self._observe("context", t0)

    async def _judge(
        self, req: SearchRequest, run: SearchRun, found: list[Candidate], view: StoreView
    ) -> Verdict:
        t0 = time.perf_counter()
        try:
            return await self.relevance.judge(req, run.query, run.model, found, view)
        except WeaviateBaseError as exc:
            raise unavailable(exc, "search") from exc
        finally:
            run.timings["search_ms"] = run.timings.get("search_ms", 0.0) + self._observe(
                "relevance", t0
            )

    @property
    def _reserve_s(self) -> float:
        return self.settings.reserve_ms / 1000.0

    async def _rewrite(self, req: SearchRequest, run: SearchRun) -> str:
        kind = run.chain.transformer
        if kind is TransformerKind.NONE:
            return req.query
        if self.rewriter is None:
            run.degraded_reason = DegradedReason.REWRITE_UNAVAILABLE
            return req.query
        t0 = time.perf_counter()
        timeout_s = run.deadline.cap(self.settings.rewrite_timeout_s, self._reserve_s)
        query = await rewrite_or_none(self.rewriter, req.query, timeout_s, kind, run.chain.prompt)
        run.timings["rewrite_ms"] = self._observe("rewrite", t0)
        if query is None:
            run.degraded_reason = DegradedReason.REWRITE_FAILED
            return req.query
        run.transformer = f"{kind.value}:{self.rewriter.name}"
        return query

    async def _embed(
        self, query: str, search_type: SearchType, run: SearchRun
    ) -> tuple[list[float] | None, str]:
        if search_type is SearchType.KEYWORD:
            return None, ""
        t0 = time.perf_counter()
        reply = await self.stage.ask(
            self.stage.topology.subject("kb.embed", tenant=run.request.tenant),
            EmbedRequest(
                texts=(query,),
                input_type=InputType.QUERY,
                budget_ms=run.deadline.left_ms() or 1,
                token_states=run.chain.query_states,
            ),
            EmbedReply,
            stage="embedder",
            timeout_s=run.deadline.cap(self.settings.embed_timeout_s, self._reserve_s),
        )
        run.timings["embed_ms"] = self._observe("embed", t0)
        if reply.token_states:
            # The reranker scores with these instead of encoding the query again.
            run.query_states = QueryStates(model=reply.model, states=reply.token_states[0])
        return list(reply.vectors[0]), reply.model

    async def _embed_probes(self, texts: list[str]) -> tuple[str, list[list[float]]]:
        reply = await self.stage.ask(
            self.stage.topology.subject("kb.embed", tenant=UNKNOWN),
            EmbedRequest(texts=tuple(texts), input_type=InputType.QUERY),
            EmbedReply,
            stage="embedder",
            timeout_s=self.settings.embed_timeout_s,
        )
        return reply.model, [list(v) for v in reply.vectors]

    def _store_wait(self, run: SearchRun) -> float:
        return run.deadline.cap(self.settings.store_timeout_s, self._reserve_s)

    async def _rerank(
        self, req: SearchRequest, run: SearchRun, found: Sequence[Candidate]
    ) -> Reranked:
        reranked = await self.second_stage.rerank(
            req, run.chain, run.query, found, run.deadline, run.query_states
        )
        if reranked.waited_s:
            self.latency.labels("rerank").observe(reranked.waited_s)
        run.timings["rerank_ms"] = reranked.waited_s * 1000.0
        run.reranked = len(reranked.scores or ())
        run.degraded_reason = reranked.degraded or run.degraded_reason
        return reranked

    def _blend(self, req: SearchRequest, run: SearchRun) -> Blend:
        """How the hits are made: a reranked hit keeps a share of its first-stage score, none
        in keyword search (a raw BM25 score is on no common scale)."""
        keyword = req.search_type is SearchType.KEYWORD
        return Blend(
            search_type=req.search_type,
            prior_weight=0.0 if keyword else self.settings.rerank_prior_weight,
            document_weight=run.document_weight,
            min_score=run.min_score,
            by_document=req.group_by_document,
            k=run.k,
        )

    def _observe(self, stage: str, t0: float) -> float:
        elapsed = time.perf_counter() - t0
        self.latency.labels(stage).observe(elapsed)
        return elapsed * 1000.0

    def _reply(self, run: SearchRun, searched: bool = True) -> SearchReply:
        run.timings["total_ms"] = self._observe("total", run.started)
        if run.degraded_reason is not None:
            self.degraded.labels(run.degraded_reason.value).inc()
            # Where a degraded answer came from, on the trace of the request it answered.
            annotate("kbus.degraded_reason", run.degraded_reason.value)
        return reply_of(run, searched)
