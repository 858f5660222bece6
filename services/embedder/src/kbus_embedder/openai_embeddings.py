"""An OpenAI-compatible embeddings server as the embedding backend: ``POST {url}/embeddings``.

OpenAI itself, vLLM, Text Embeddings Inference, Ollama, Infinity and llama.cpp's servers all
answer this shape. Texts go in calls of at most ``batch_size``, a few calls at once; the server's
failures are kbus's typed errors, chosen so that nothing is lost to a server that is down,
slow, overloaded or misconfigured: each is an outage (the stage waits and tries again, as it
does for the store), and only a text the server refuses as such is dead-lettered. A ``429``
is waited out here first (its ``Retry-After``, else doubling pauses), up to ``rate_limit_wait_s``.

A server has no token states for the local reranker: that reranker encodes the candidates
itself (its chain says so), and the embedding cache keeps the server's vectors by its model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
from kbus_contract import InputType
from kbus_contract.errors import ErrorCode, PermanentError, TransientError
from kbus_runtime.model_servers import MISCONFIGURED, Overload, address

from kbus_embedder.settings import OpenAIEmbeddingSettings


class OpenAIEmbedder:
    """Vectors from an OpenAI-compatible ``/embeddings`` endpoint, unit length."""

    def __init__(self, settings: OpenAIEmbeddingSettings) -> None:
        self.settings = settings
        self.url, headers = address(
            settings.url,
            settings.api_key,
            "KBUS_EMBEDDER_OPENAI_URL",
            "the OpenAI-compatible backend",
        )
        self.client = httpx.AsyncClient(
            base_url=self.url + "/", headers=headers, timeout=settings.timeout_s
        )
        self.model = f"openai/{settings.model}"
        self.dimension = settings.dimensions or self._probe()
        self._calls = asyncio.Semaphore(settings.concurrency)

    def _probe(self) -> int:
        """The server's vector length, asked once at start (no dimensions configured)."""
        try:
            response = httpx.post(
                f"{self.url}/embeddings",
                json=self._body(["kbus"]),
                headers=self.client.headers,
                timeout=self.settings.timeout_s,
            )
            return len(self._vectors(response, 1, None)[0])
        except (httpx.HTTPError, TransientError, PermanentError) as exc:
            raise RuntimeError(
                f"the embeddings server at {self.url} did not answer a first call ({exc}); "
                "start it, or set KBUS_EMBEDDER_OPENAI_DIMENSIONS to start without asking it"
            ) from exc

    async def embed(
        self, texts: Sequence[str], input_type: InputType, key: str = "", urgent: bool = False
    ) -> tuple[np.ndarray, None]:
        size = self.settings.batch_size
        parts = await asyncio.gather(
            *(self._call(texts[i : i + size]) for i in range(0, len(texts), size))
        )
        if not parts:
            return np.zeros((0, self.dimension), dtype=np.float32), None
        array = np.concatenate(parts).astype(np.float32)
        unit: np.ndarray = array / np.clip(
            np.linalg.norm(array, axis=1, keepdims=True), 1e-12, None
        )
        return unit, None

    async def _call(self, texts: Sequence[str]) -> np.ndarray:
        """One call, a 429 waited out up to the settings' patience."""
        overload = Overload(self.settings.rate_limit_wait_s)
        while True:
            async with self._calls:
                try:
                    response = await self.client.post("embeddings", json=self._body(texts))
                except httpx.HTTPError as exc:
                    raise self._outage(f"did not answer ({type(exc).__name__}: {exc})") from exc
            if response.status_code != 429:
                return np.asarray(
                    self._vectors(response, len(texts), self.dimension), dtype=np.float32
                )
            wait = overload.pause(response)
            if wait is None:
                raise self._outage(
                    f"answered 429 (too many requests) for {overload.waited_s:.0f} s"
                )
            await asyncio.sleep(wait)

    def _body(self, texts: Sequence[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.settings.model, "input": list(texts)}
        if self.settings.dimensions:
            body["dimensions"] = self.settings.dimensions
        return body

    def _vectors(
        self, response: httpx.Response, count: int, dimension: int | None
    ) -> list[list[float]]:
        """The vectors of an answer, in the order of its texts, each ``dimension`` long."""
        status = response.status_code
        if status in MISCONFIGURED or status >= 500:
            raise self._outage(f"answered {status}: {response.text[:200]}")
        if status >= 400:
            raise PermanentError(
                f"the embeddings server at {self.url} refused the text ({status}): "
                f"{response.text[:200]}",
                code=ErrorCode.INVALID,
            )
        try:
            data = sorted(response.json()["data"], key=lambda row: int(row["index"]))
            vectors = [[float(x) for x in row["embedding"]] for row in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise self._outage("answered something that is not a list of embeddings") from exc
        if len(vectors) != count:
            raise self._outage(f"answered {len(vectors)} vectors for {count} texts")
        wrong = {len(v) for v in vectors} - {dimension or len(vectors[0])}
        if wrong:
            raise self._outage(
                f"answered {min(wrong)}-dimensional vectors where this model's are "
                f"{dimension}-dimensional: point KBUS_EMBEDDER_OPENAI_URL and _MODEL back "
                "at the model this index was embedded with, or re-embed it "
                "(python -m kbus_searcher.jobs.reembed)"
            )
        return vectors

    def _outage(self, what: str) -> TransientError:
        return TransientError(
            f"the embeddings server at {self.url} {what}", code=ErrorCode.UNAVAILABLE
        )

    async def close(self) -> None:
        await self.client.aclose()
