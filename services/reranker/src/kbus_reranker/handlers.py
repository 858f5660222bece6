"""Endpoints of the reranker: thin; the work is in :mod:`kbus_reranker.reranking`."""

from __future__ import annotations

from kbus_shared.answering import Served, serve
from kbus_shared.topology import Topology
from nats.aio.client import Client

from kbus_reranker.reranking import Reranker


async def register_rerank_service(
    nc: Client, topology: Topology, reranker: Reranker, version: str, concurrency: int
) -> Served:
    """Serve ``kb.rerank`` as the NATS micro service ``kbus-rerank``, ``concurrency`` at once
    (a local model still scores one request at a time: :meth:`Reranker.rerank`)."""
    return await serve(
        nc,
        topology,
        {"kb.rerank": reranker.answer},
        version=version,
        description="kbus reranker: scores for candidates",
        concurrency=concurrency,
    )
