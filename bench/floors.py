"""The floors: each stage's work done in-process, without the bus or the framework."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from kbus_contract import EmbeddedChunk, EmbeddingsReady, SearchType
from kbus_dev.servers import Server
from kbus_embedder.settings import EmbedderSettings
from kbus_models.encoder import Encoder, resolve
from kbus_reranker.scoring import Scorer
from kbus_runtime.passages import passage_text
from kbus_runtime.settings import StoreSettings
from kbus_runtime.store import weaviate_client
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store import ChunkStore, Query, Scope
from weaviate import WeaviateAsyncClient

from bench.corpus import Corpus
from bench.pipeline import cpu_seconds
from bench.stats import percentiles

#: Cores a query runs on in-process: what the embedder service does by default.
QUERY_THREADS: int = EmbedderSettings.model_fields["query_threads"].default


def encode_rate(
    corpus: Corpus, encoder: Encoder, batch_size: int
) -> tuple[dict[str, float], list[np.ndarray]]:
    """Bare encoder (E): chunks per second embedding the corpus's chunk texts in-process.

    Also returns the vectors, one array per document, for the import floor.
    """
    texts = corpus.chunk_texts
    encoder.embed(texts[:batch_size], batch_size)  # warm-up: onnxruntime allocates on first run
    started, cpu = time.perf_counter(), time.process_time()
    flat = encoder.embed(texts, batch_size)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    vectors, begin = [], 0
    for ready in corpus.chunked:
        vectors.append(flat[begin : begin + len(ready.chunks)])
        begin += len(ready.chunks)
    rate = {
        "chunks": len(texts),
        "seconds": seconds,
        "chunks_per_s": len(texts) / seconds,
        "cpu_ms_per_chunk": cpu * 1000 / len(texts),
    }
    return rate, vectors


async def import_rate(
    corpus: Corpus,
    vectors: list[np.ndarray],
    store: StoreSettings,
    model: str,
    server: Server | None = None,
) -> dict[str, float]:
    """Bare Weaviate import (W): the same objects the indexer writes, as many documents per
    request as the indexer's largest batch; with ``server``, Weaviate's own CPU too."""
    per_request = SearcherSettings().index_concurrency
    collection = f"BenchImport{uuid.uuid4().hex[:8]}"
    client = weaviate_client(store)
    await client.connect()
    try:
        chunks = ChunkStore.configured(
            client, SearcherSettings(store=store.model_copy(update={"collection": collection}))
        )
        await chunks.collections.ensure()
        messages = [
            EmbeddingsReady(
                document=ready.document,
                model=model,
                dimension=vecs.shape[1],
                total_chunks=len(ready.chunks),
                chunks=tuple(
                    EmbeddedChunk(**c.model_dump(), vector=tuple(v.tolist()))
                    for c, v in zip(ready.chunks, vecs, strict=True)
                ),
            )
            for ready, vecs in zip(corpus.chunked, vectors, strict=True)
        ]
        server_cpu = cpu_seconds(server) if server else 0.0
        started, cpu = time.perf_counter(), time.process_time()
        for begin in range(0, len(messages), per_request):
            errors = await chunks.writes.write(messages[begin : begin + per_request])
            if any(errors):
                raise RuntimeError(f"the bare import failed: {next(e for e in errors if e)}")
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        server_cpu = cpu_seconds(server) - server_cpu if server else 0.0
        await chunks.collections.drop()
    finally:
        await client.close()
    n = corpus.chunks
    # The client's CPU (building and sending the objects) is work the indexer must do too.
    return {
        "chunks": n,
        "seconds": seconds,
        "chunks_per_s": n / seconds,
        "client_cpu_ms_per_chunk": cpu * 1000 / n,
        **({"server_cpu_ms_per_chunk": server_cpu * 1000 / n} if server else {}),
    }


def _fetch_size() -> int:
    # What the searcher over-fetches for a default request (k results, not grouped).
    s = SearcherSettings()
    return max(s.overfetch_min, s.overfetch_factor * s.k)


@dataclass
class QueryFloor:
    """In-process query stages: embed, Weaviate hybrid, rerank; one query at a time.

    ``measure`` runs one query so that the bench can interleave it with the same query through
    kbus and through LlamaIndex; ``summary`` gives per-stage latency (ms): ``total`` is embed +
    search (the first stage), ``total_with_rerank`` adds the in-process rerank (the default path).
    """

    encoder: Encoder
    scorer: Scorer
    rerank_depth: int
    store: StoreSettings
    tenant: str
    library: str
    alpha: float
    stages: dict[str, list[float]] = field(
        default_factory=lambda: {
            name: [] for name in ("embed", "search", "rerank", "total", "total_with_rerank")
        }
    )
    _chunks: ChunkStore | None = None
    _client: WeaviateAsyncClient | None = None

    @classmethod
    def create(
        cls,
        model: str,
        rerank_model: str,
        threads: int,
        rerank_depth: int,
        store: StoreSettings,
        **scope: Any,
    ) -> QueryFloor:
        from kbus_reranker.scoring import MaxSimScorer

        encoder = Encoder(resolve(model), threads=threads, lone_threads=QUERY_THREADS)
        scorer = MaxSimScorer(rerank_model, threads)
        return cls(encoder, scorer, rerank_depth, store, **scope)

    async def __aenter__(self) -> QueryFloor:
        client = weaviate_client(self.store)
        await client.connect()
        self._client = client
        self._chunks = ChunkStore.configured(client, SearcherSettings(store=self.store))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.close()

    async def measure(self, query: str) -> None:
        """One query through the three stages, timed."""
        assert self._chunks is not None, "use QueryFloor as an async context manager"
        t0 = time.perf_counter()
        vector = self.encoder.embed([query])[0].tolist()
        t1 = time.perf_counter()
        found = await self._chunks.view(Scope.of_caller(self.tenant, None, ("*",))).search(
            Query(
                libraries=(self.library,),
                text=query,
                vector=vector,
                search_type=SearchType.HYBRID,
                alpha=self.alpha,
                limit=_fetch_size(),
            )
        )
        t2 = time.perf_counter()
        passages = [
            passage_text(
                c.properties.get("title") or "",
                c.properties.get("heading_path") or (),
                c.properties.get("text") or "",
            )
            for c in found[: self.rerank_depth]
        ]
        self.scorer.score(query, passages)
        t3 = time.perf_counter()
        for name, a, b in (("embed", t0, t1), ("search", t1, t2), ("rerank", t2, t3)):
            self.stages[name].append((b - a) * 1000)
        self.stages["total"].append((t2 - t0) * 1000)
        self.stages["total_with_rerank"].append((t3 - t0) * 1000)

    def summary(self) -> dict[str, dict[str, float]]:
        return {name: percentiles(values) for name, values in self.stages.items()}
