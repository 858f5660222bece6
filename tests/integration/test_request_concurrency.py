"""The embedder and the reranker answer several requests at once, over the real bus.

The model is a slow stand-in (a real one cannot be made to take a known time); everything
between the bus and the model is the services' own code.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest
from faststream.nats import NatsBroker
from kbus_contract import (
    EmbedReply,
    EmbedRequest,
    InputType,
    RerankCandidate,
    RerankReply,
    RerankRequest,
)
from kbus_contract.topology import Topology
from kbus_embedder.vectorizing import Vectorizer
from kbus_reranker.reranking import Reranker
from kbus_runtime.answering import Answer, serve
from kbus_runtime.bus import make_broker
from kbus_runtime.settings import BusSettings
from kbus_runtime.stage import Stage
from kbus_runtime.stage_metrics import StageMetrics
from nats.aio.client import Client
from prometheus_client import CollectorRegistry
from pydantic import BaseModel

from tests.helpers import request_when_served

WAIT_S = 0.3


class Overlap:
    """Counts calls in progress and the most at once."""

    def __init__(self) -> None:
        self.now = self.most = 0
        self._lock = threading.Lock()

    def enter(self) -> None:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def leave(self) -> None:
        with self._lock:
            self.now -= 1


class SlowScorer:
    name = "slow"

    def __init__(self, local: bool) -> None:
        self.local = local
        self.overlap = Overlap()

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        self.overlap.enter()
        time.sleep(WAIT_S)
        self.overlap.leave()
        return np.zeros(len(passages), dtype=np.float32)


class SlowEmbedder:
    model = "slow"
    dimension = 3

    def __init__(self) -> None:
        self.overlap = Overlap()

    async def embed(
        self, texts: Sequence[str], input_type: InputType, key: str = "", urgent: bool = False
    ) -> tuple[np.ndarray, None]:
        self.overlap.enter()
        await asyncio.sleep(WAIT_S)
        self.overlap.leave()
        return np.ones((len(texts), self.dimension), dtype=np.float32), None


async def _ask_five(
    broker: NatsBroker,
    nc: Client,
    topology: Topology,
    answers: dict[str, Answer],
    request: BaseModel,
) -> list[bytes]:
    """Serve ``answers`` (three at once) and send five requests to the one subject at once."""
    [name] = answers
    subject = topology.every(name)
    body = request.model_dump_json().encode()
    async with broker:
        await broker.connect()
        served = await serve(
            broker.connection, topology, answers, version="0.0.1", description="test", concurrency=3
        )
        replies = await asyncio.gather(*(request_when_served(nc, subject, body) for _ in range(5)))
        await served.stop()
    return [r.data for r in replies]


@pytest.mark.parametrize(("local", "most"), [(False, 3), (True, 1)], ids=["remote", "local"])
async def test_the_reranker_overlaps_remote_calls_and_takes_turns_on_the_cores(
    bus: BusSettings, nc: Client, local: bool, most: int
) -> None:
    registry = CollectorRegistry()
    broker = make_broker(bus, registry, "reranker")
    scorer = SlowScorer(local)
    stage = Stage("reranker", broker, bus.topology, StageMetrics(registry))
    reranker = Reranker(stage, lambda: scorer, max_candidates=10, registry=registry)
    reranker.load()
    request = RerankRequest(query="q", candidates=(RerankCandidate(id="a", text="a"),))
    replies = await _ask_five(broker, nc, bus.topology, {"kb.rerank": reranker.answer}, request)

    assert all(RerankReply.model_validate_json(r).scores == (0.0,) for r in replies)
    assert scorer.overlap.most == most


async def test_the_embedder_answers_requests_side_by_side(bus: BusSettings, nc: Client) -> None:
    registry = CollectorRegistry()
    broker = make_broker(bus, registry, "embedder")
    embedder = SlowEmbedder()
    stage = Stage("embedder", broker, bus.topology, StageMetrics(registry))
    vectorizer = Vectorizer(stage, lambda _: embedder, True, registry)
    vectorizer.load()
    request = EmbedRequest(texts=("a query",))
    replies = await _ask_five(broker, nc, bus.topology, {"kb.embed": vectorizer.answer}, request)

    assert all(EmbedReply.model_validate_json(r).dimension == 3 for r in replies)
    assert embedder.overlap.most == 3
