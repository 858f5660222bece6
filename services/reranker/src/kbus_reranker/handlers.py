"""Endpoints of the reranker: thin; the work is in :mod:`kbus_reranker.reranking`."""

from __future__ import annotations

from kbus_runtime.service import Service

from kbus_reranker.prompting import prompted_state
from kbus_reranker.reranking import Reranker
from kbus_reranker.settings import RerankerSettings


def register(service: Service, reranker: Reranker, settings: RerankerSettings) -> None:
    """Serve ``kb.rerank`` and ``kb.chat.reranker`` as the NATS micro service ``kbus-rerank``
    (a local model still scores one request at a time: :meth:`Reranker.rerank`)."""
    service.answer(
        {
            "kb.rerank": reranker.answer,
            "kb.chat.reranker": lambda _: prompted_state(reranker.prompted),
        },
        description="kbus reranker: scores for candidates",
        concurrency=settings.request_concurrency,
    )
