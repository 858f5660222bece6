"""A rerank server as the second stage: ``POST {url}/rerank``.

Two shapes are spoken: Cohere's (``query``, ``documents``, ``top_n`` in; ``results`` of
``index`` and ``relevance_score`` out), which Infinity, vLLM, Jina, llama.cpp's server and
Cohere-compatible gateways answer, and Text Embeddings Inference's (``query``, ``texts`` in; a
list of ``index`` and ``score`` out). A search cannot wait for a server that is down, slow or
overloaded: each is an outage (``unavailable``) after a short wait for a 429, and the search
goes on in first-stage order, marked degraded. kbus writes every request, so a server that
refuses one is configured for another shape, model or key: an outage too, named so; only a
request refused as too large (413) is the request's own. Scores are the server's, one per
candidate, in the candidates' order.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
from kbus_contract.errors import ErrorCode, PermanentError, TransientError
from kbus_runtime.model_servers import Overload, address

from kbus_reranker.settings import RerankEndpointSettings


class EndpointScorer:
    """Relevance scores from a rerank server."""

    local = False

    def __init__(self, settings: RerankEndpointSettings) -> None:
        self.settings = settings
        self.url, headers = address(
            settings.url, settings.api_key, "KBUS_RERANKER_ENDPOINT_URL", "the endpoint reranker"
        )
        self.client = httpx.Client(
            base_url=self.url + "/", headers=headers, timeout=settings.timeout_s
        )
        self.name = f"endpoint/{settings.model or settings.api}"

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        if not passages:
            return np.zeros(0, dtype=np.float32)
        overload = Overload(self.settings.rate_limit_wait_s)
        while True:
            try:
                response = self.client.post("rerank", json=self._body(query, passages))
            except httpx.HTTPError as exc:
                raise self._outage(f"did not answer ({type(exc).__name__}: {exc})") from exc
            if response.status_code != 429:
                return self._scores(response, len(passages))
            wait = overload.pause(response)
            if wait is None:
                raise self._outage(
                    f"answered 429 (too many requests) for {overload.waited_s:.1f} s"
                )
            time.sleep(wait)

    def _body(self, query: str, passages: Sequence[str]) -> dict[str, Any]:
        if self.settings.api == "tei":
            return {"query": query, "texts": list(passages), "raw_scores": False}
        body: dict[str, Any] = {
            "query": query,
            "documents": list(passages),
            "top_n": len(passages),
            "return_documents": False,
        }
        if self.settings.model:
            body["model"] = self.settings.model
        return body

    def _scores(self, response: httpx.Response, count: int) -> np.ndarray:
        """One score per candidate, in their order."""
        status = response.status_code
        if status == 413:
            raise PermanentError(
                f"the rerank server at {self.url} refused the candidates as too large: ask "
                "for fewer",
                code=ErrorCode.TOO_MANY_CANDIDATES,
            )
        if status >= 500:
            raise self._outage(f"answered {status}: {response.text[:200]}")
        if status >= 400:
            raise self._outage(
                f"refused kbus's request ({status}: {response.text[:120]}): check "
                "KBUS_RERANKER_ENDPOINT_URL, _API, _MODEL and _API_KEY"
            )
        try:
            answer = response.json()
            rows = answer if self.settings.api == "tei" else answer["results"]
            key = "score" if self.settings.api == "tei" else "relevance_score"
            scored = {int(row["index"]): float(row[key]) for row in rows}
        except (ValueError, KeyError, TypeError) as exc:
            raise self._outage(f"answered something that is not {self.settings.api}'s") from exc
        if sorted(scored) != list(range(count)):
            raise self._outage(f"answered {len(scored)} scores for {count} candidates")
        return np.array([scored[i] for i in range(count)], dtype=np.float32)

    def _outage(self, what: str) -> TransientError:
        return TransientError(f"the rerank server at {self.url} {what}", code=ErrorCode.UNAVAILABLE)
