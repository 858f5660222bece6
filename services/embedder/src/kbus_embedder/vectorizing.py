"""The embedder's work: chunks to vectors, and query vectors on request."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from faststream.nats.message import NatsMessage
from kbus_contract import (
    ChunksReady,
    EmbeddedChunk,
    EmbeddingsReady,
    EmbedReply,
    EmbedRequest,
    ErrorReply,
    InputType,
)
from kbus_contract.errors import ErrorCode, TransientError
from kbus_contract.lanes import Lane
from kbus_contract.work import chunks_work
from kbus_runtime.answering import Inbound
from kbus_runtime.deadlines import Deadline
from kbus_runtime.stage import Stage
from kbus_runtime.token_states import TokenStateStore, pack
from prometheus_client import CollectorRegistry, Counter, Histogram

from kbus_embedder.caching import EmbeddingCache
from kbus_embedder.embedding import CallObserver, Embedder, document_text


class Vectorizer:
    """Embeds the chunks of each document and answers embedding requests."""

    def __init__(
        self,
        stage: Stage,
        load: Callable[[CallObserver], Embedder],
        include_title: bool,
        registry: CollectorRegistry,
        cache: EmbeddingCache | None = None,
        tokens: TokenStateStore | None = None,
    ) -> None:
        self.stage = stage
        self.cache = cache
        self.tokens = tokens
        self._load = load
        self._embedder: Embedder | None = None
        self.include_title = include_title
        self.chunks_embedded = Counter(
            "kbus_embedder_chunks", "Chunks embedded", ["model"], registry=registry
        )
        self.cached = Counter(
            "kbus_embedder_cached_chunks",
            "Chunks whose vector came from the cache",
            ["model"],
            registry=registry,
        )
        self.seconds = Histogram(
            "kbus_embedder_seconds", "Time to embed one batch", ["kind"], registry=registry
        )
        # Full calls are what keeps the encoder busy: calls well below the gather size while a
        # backlog waits mean too few messages are held at once (KBUS_EMBEDDER_CONCURRENCY).
        self.call_texts = Histogram(
            "kbus_embedder_call_texts",
            "Texts per local model call for documents (gathered across chunks.ready messages)",
            registry=registry,
            buckets=(1, 4, 8, 16, 32, 48, 63, 64, 128, 256, 512),
        )

    def load(self) -> Embedder:
        """Load the model (in the app's lifespan, never at import)."""
        self._embedder = self._load(self.call_texts.observe)
        return self._embedder

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            raise TransientError("the embedding model is not loaded yet", code=ErrorCode.NOT_READY)
        return self._embedder

    async def handle_chunks(self, message: NatsMessage) -> None:
        """Settle one ``chunks.ready`` message."""
        await self.stage.settle(message, ChunksReady, self.embed_chunks)

    async def embed_chunks(self, ready: ChunksReady) -> None:
        """Embed one part of a document's chunks and publish it on ``embeddings.ready`` (none
        of a document deleted or published again since)."""
        doc = ready.document
        if not await self.stage.wanted(doc.tenant, doc.library, doc.document_id, doc.sequence):
            return
        texts = [document_text(doc, c, self.include_title) for c in ready.chunks]
        urgent = doc.lane is Lane.INTERACTIVE
        vectors = await self.vectors_of(texts, key=doc.tenant, urgent=urgent)
        matching = [
            document_text(doc, c.model_copy(update={"text": m}), self.include_title)
            for c in ready.chunks
            for m in c.matching
        ]
        # Nothing re-scores a matching text's tokens (the reranker reads the chunk's).
        extra = iter(
            await self.vectors_of(matching, keep_states=False, key=doc.tenant, urgent=urgent)
            if matching
            else []
        )
        # The array itself: a tuple of floats would be validated float by float.
        embedded = [
            EmbeddedChunk(
                **chunk.model_dump(),
                vector=vector,
                matching_vectors=tuple(next(extra) for _ in chunk.matching),
            )
            for chunk, vector in zip(ready.chunks, vectors, strict=True)
        ]
        topology = self.stage.topology
        out = EmbeddingsReady(
            document=ready.document,
            model=self.embedder.model,
            dimension=self.embedder.dimension,
            part=ready.part,
            parts=ready.parts,
            total_chunks=ready.total_chunks or len(embedded),
            chunks=tuple(embedded),
        )
        await self.stage.publish(
            out,
            topology.of_document("embeddings.ready", doc),
            stream=topology.embeddings_stream.name,
            work=chunks_work(embedded),
        )

    async def vectors_of(
        self, texts: list[str], keep_states: bool = True, key: str = "", urgent: bool = False
    ) -> np.ndarray:
        """Cached vectors where there are any; the rest embedded (and then cached, with their
        token states where ``keep_states``), in turn with other tenants' (``key``; ``urgent``:
        before the tenant's other work)."""
        model, dimension = self.embedder.model, self.embedder.dimension
        cached = (
            await self.cache.get_many(model, texts, dimension)
            if self.cache
            else [None] * len(texts)
        )
        missing = [i for i, v in enumerate(cached) if v is None]
        out = np.zeros((len(texts), dimension), dtype=np.float32)
        for i, vector in enumerate(cached):
            if vector is not None:
                out[i] = vector
        # A text that repeats (boilerplate, a repetitive document) is embedded once.
        unique = list(dict.fromkeys(texts[i] for i in missing))
        if unique:
            started = time.perf_counter()
            fresh, states = await self.embedder.embed(unique, InputType.DOCUMENT, key, urgent)
            self.seconds.labels("document").observe(time.perf_counter() - started)
            by_text = dict(zip(unique, fresh, strict=True))
            for i in missing:
                out[i] = by_text[texts[i]]
            if self.cache:
                await self.cache.put_many(model, unique, np.asarray(fresh))
            if self.tokens and states is not None and keep_states:
                await self.tokens.put_many(model, unique, states)
        self.chunks_embedded.labels(model).inc(len(unique))
        self.cached.labels(model).inc(len(texts) - len(missing))
        return out

    async def answer(self, inbound: Inbound) -> EmbedReply | ErrorReply:
        """Answer one ``kb.embed`` request."""
        return await self.stage.answer(
            inbound.body,
            EmbedRequest,
            lambda request: self.embed_request(request, inbound.deadline(request.budget_ms)),
        )

    async def embed_request(
        self, request: EmbedRequest, deadline: Deadline | None = None
    ) -> EmbedReply:
        """Vectors for the texts of a request (none once ``deadline`` has passed)."""
        if deadline is not None:
            deadline.check("waiting for the embedder")
        started = time.perf_counter()
        vectors, tokens = await self.embedder.embed(request.texts, request.input_type)
        self.seconds.labels("request").observe(time.perf_counter() - started)
        return EmbedReply(
            model=self.embedder.model,
            dimension=self.embedder.dimension,
            vectors=tuple(vectors),
            token_states=(
                tuple(pack(t) for t in tokens)
                if request.token_states and tokens is not None
                else None
            ),
        )
