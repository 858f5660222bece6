"""Token states kept by the embedder and read by the reranker, over a real NATS."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np
import pytest
from kbus_contract import EmbedRequest, InputType, QueryStates, RerankCandidate, RerankRequest
from kbus_embedder.embedding import LocalEmbedder
from kbus_embedder.vectorizing import Vectorizer
from kbus_reranker.reranking import Reranker
from kbus_reranker.scoring import MaxSimScorer
from kbus_runtime.bus import make_broker
from kbus_runtime.settings import BusSettings
from kbus_runtime.stage import Stage
from kbus_runtime.stage_metrics import StageMetrics
from kbus_runtime.token_states import TokenStateStore
from prometheus_client import CollectorRegistry

from tests.helpers import PASSAGES

MODEL = "all-MiniLM-L6-v2"
QUERY = "Does the receptor protect mice from obesity?"


@dataclass
class Pair:
    """An embedder's vectorizer and a reranker on one bus, sharing one token-state bucket."""

    vectorizer: Vectorizer
    reranker: Reranker
    registry: CollectorRegistry

    def passages(self, states: str) -> float:
        value = self.registry.get_sample_value("kbus_rerank_passages_total", {"states": states})
        return value or 0.0

    def queries(self, states: str) -> float:
        value = self.registry.get_sample_value("kbus_rerank_queries_total", {"states": states})
        return value or 0.0


@pytest.fixture(scope="module")
def scorer() -> MaxSimScorer:
    return MaxSimScorer(MODEL, threads=1, batch_size=2)


@pytest.fixture
async def pair(bus: BusSettings, scorer: MaxSimScorer) -> AsyncIterator[Pair]:
    registry = CollectorRegistry()
    broker = make_broker(bus, registry, "tokens")
    stage = Stage("tokens", broker, bus.topology, StageMetrics(registry))
    written = TokenStateStore(bus.topology.token_states_kv)
    vectorizer = Vectorizer(
        stage, lambda _: LocalEmbedder(MODEL, 1, 2), True, registry, tokens=written
    )
    vectorizer.load()
    reranker = Reranker(
        stage,
        lambda: scorer,
        max_candidates=10,
        registry=registry,
        tokens=TokenStateStore(bus.topology.token_states_kv),
    )
    reranker.load()
    async with broker:
        await broker.connect()
        await written.open(broker.connection, create=True)
        yield Pair(vectorizer, reranker, registry)


def _request(texts: list[str], query_states: QueryStates | None = None) -> RerankRequest:
    candidates = tuple(RerankCandidate(id=str(i), text=t) for i, t in enumerate(texts))
    return RerankRequest(query=QUERY, candidates=candidates, query_states=query_states)


async def test_the_reranker_scores_what_the_embedder_kept_without_encoding_it(
    pair: Pair, scorer: MaxSimScorer
) -> None:
    await pair.vectorizer.vectors_of(PASSAGES)

    reply = await pair.reranker.rerank(_request(PASSAGES))

    assert pair.passages("stored") == len(PASSAGES)
    assert pair.passages("encoded") == 0
    encoded = scorer.score(QUERY, PASSAGES)
    assert np.allclose(reply.scores, encoded, atol=2e-3)
    assert int(np.argmax(reply.scores)) == 1


async def test_a_passage_the_embedder_never_saw_is_encoded_beside_the_stored_ones(
    pair: Pair, scorer: MaxSimScorer
) -> None:
    await pair.vectorizer.vectors_of(PASSAGES[:2])

    reply = await pair.reranker.rerank(_request(PASSAGES))

    assert (pair.passages("stored"), pair.passages("encoded")) == (2, 1)
    assert reply.scores[2] == pytest.approx(float(scorer.score(QUERY, PASSAGES[2:])[0]), abs=1e-5)


async def test_a_reranker_started_before_the_bucket_exists_finds_it_later(
    bus: BusSettings, scorer: MaxSimScorer
) -> None:
    registry = CollectorRegistry()
    broker = make_broker(bus, registry, "tokens")
    stage = Stage("tokens", broker, bus.topology, StageMetrics(registry))
    store = TokenStateStore(bus.topology.token_states_kv)
    reranker = Reranker(stage, lambda: scorer, max_candidates=10, registry=registry, tokens=store)
    reranker.load()
    async with broker:
        await broker.connect()
        await reranker.rerank(_request(PASSAGES[:1]))
        assert not store.is_open
        await broker.connection.jetstream().create_key_value(bus.topology.token_states_kv)
        store._tried_at -= 60  # as if the wait between attempts had passed
        await reranker.rerank(_request(PASSAGES[:1]))
        assert store.is_open


async def test_with_the_query_s_states_from_the_embedder_the_reranker_encodes_nothing(
    pair: Pair, scorer: MaxSimScorer
) -> None:
    await pair.vectorizer.vectors_of(PASSAGES)
    asked = EmbedRequest(texts=(QUERY,), input_type=InputType.QUERY, token_states=True)
    embedded = await pair.vectorizer.embed_request(asked)
    assert embedded.token_states is not None
    sent = QueryStates(model=embedded.model, states=embedded.token_states[0])

    reply = await pair.reranker.rerank(_request(PASSAGES, sent))

    assert (pair.queries("sent"), pair.queries("encoded")) == (1, 0)
    assert pair.passages("encoded") == 0
    assert np.allclose(reply.scores, scorer.score(QUERY, PASSAGES), atol=3e-3)
    assert int(np.argmax(reply.scores)) == 1


async def test_a_query_s_states_of_another_model_are_not_used(pair: Pair) -> None:
    asked = EmbedRequest(texts=(QUERY,), input_type=InputType.QUERY, token_states=True)
    embedded = await pair.vectorizer.embed_request(asked)
    assert embedded.token_states is not None
    other = QueryStates(model="another-model", states=embedded.token_states[0])

    await pair.reranker.rerank(_request(PASSAGES, other))

    assert (pair.queries("sent"), pair.queries("encoded")) == (0, 1)


async def test_vectors_alone_come_without_token_states(pair: Pair) -> None:
    embedded = await pair.vectorizer.embed_request(EmbedRequest(texts=(QUERY, "another")))
    assert embedded.token_states is None
    assert len(embedded.vectors) == 2
