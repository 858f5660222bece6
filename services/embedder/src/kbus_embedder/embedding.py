"""Embedding backends: a local encoder (the default), Cohere, and any OpenAI-compatible server
(:mod:`kbus_embedder.openai_embeddings`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np
from kbus_contract import Chunk, DocumentRef, InputType
from kbus_runtime import cohere_api
from kbus_runtime.batching import Batcher
from kbus_runtime.fair_share import Stride
from kbus_runtime.passages import passage_text
from kbus_runtime.settings import CohereSettings
from kbus_runtime.variants import Registry, Variant

from kbus_embedder.openai_embeddings import OpenAIEmbedder
from kbus_embedder.settings import EmbedBackend, EmbedderSettings

#: Told the number of texts of each local model call for documents.
CallObserver = Callable[[int], None]
#: Texts' vectors ``[texts, dim]`` and, from a local encoder, each text's token states.
Embedded = tuple[np.ndarray, list[np.ndarray] | None]


class Embedder(Protocol):
    """Turns texts into unit-length vectors (and token states, where the backend has them)."""

    model: str
    dimension: int

    async def embed(
        self, texts: Sequence[str], input_type: InputType, key: str = "", urgent: bool = False
    ) -> Embedded: ...


class LocalEmbedder:
    """A local BERT-family encoder on onnxruntime, run in worker threads."""

    def __init__(
        self,
        name_or_path: str,
        threads: int,
        batch_size: int,
        flush_ms: float = 10.0,
        gather: int = 64,
        query_threads: int = 1,
        on_call: CallObserver | None = None,
        batch_nice: int = 0,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        from kbus_models.encoder import Encoder, resolve

        self.encoder = Encoder(
            resolve(name_or_path), threads, lone_threads=query_threads, batch_nice=batch_nice
        )
        self.model = self.encoder.spec.name
        self.dimension = self.encoder.dimension
        self.batch_size = batch_size
        # Documents are gathered across messages; a query never waits for a deadline. Two
        # gathered calls at once: one running, the next already queued at the encoder.
        self._documents: Batcher[list[str], tuple[np.ndarray, list[np.ndarray]]] = Batcher(
            self._documents_call,
            max_size=gather,
            linger_s=flush_ms / 1000.0,
            in_flight=2,
            size=len,
            on_batch=on_call,
            name="embed documents",
            turns=Stride(weights),
        )

    async def embed(
        self, texts: Sequence[str], input_type: InputType, key: str = "", urgent: bool = False
    ) -> Embedded:
        if input_type is InputType.QUERY:
            queries = [self.encoder.spec.query_prefix + t for t in texts]
            # Urgent: a query's batch runs before any document batches queued at the encoder.
            return await self.encoder.embed_with_tokens_async(queries, self.batch_size, urgent=True)
        prefix = self.encoder.spec.document_prefix
        # Each tenant's texts take their turn in the gathered calls (``key``), a call's worth
        # at a time: a message of many chunks takes several turns, not one long one.
        size = self._documents.max_size
        pieces = [
            [prefix + t for t in texts[start : start + size]]
            for start in range(0, len(texts), size)
        ]
        rows = await asyncio.gather(
            *(self._documents.submit(piece, key, urgent=urgent) for piece in pieces)
        )
        if len(rows) == 1:
            return rows[0]
        vectors = np.concatenate([v for v, _ in rows])
        return vectors, [state for _, states in rows for state in states]

    async def _documents_call(
        self, messages: list[list[str]]
    ) -> list[tuple[np.ndarray, list[np.ndarray]]]:
        """One model call for the texts of several messages; each message gets its rows.

        The token states come from the same forward pass as the vectors, at no extra cost.
        """
        texts = [text for message in messages for text in message]
        vectors, tokens = await asyncio.to_thread(
            self.encoder.embed_with_tokens, texts, self.batch_size
        )
        rows, start = [], 0
        for message in messages:
            end = start + len(message)
            rows.append((vectors[start:end], tokens[start:end]))
            start = end
        return rows


class CohereEmbedder:
    """Cohere's embed endpoint (input types search_document and search_query)."""

    DIMENSIONS: ClassVar[dict[str, int]] = {
        "embed-english-v3.0": 1024,
        "embed-multilingual-v3.0": 1024,
        "embed-english-light-v3.0": 384,
        "embed-multilingual-light-v3.0": 384,
    }

    def __init__(self, settings: CohereSettings) -> None:
        self.client = cohere_api.async_client(settings, "the Cohere backend")
        self.model = f"cohere/{settings.embed_model}"
        self._model_id = settings.embed_model
        self.dimension = self.DIMENSIONS.get(settings.embed_model, 1024)

    async def embed(
        self, texts: Sequence[str], input_type: InputType, key: str = "", urgent: bool = False
    ) -> Embedded:
        return await self._vectors(texts, input_type), None

    async def _vectors(self, texts: Sequence[str], input_type: InputType) -> np.ndarray:
        vectors: list[list[float]] = []
        for begin in range(0, len(texts), 96):  # Cohere takes at most 96 texts per call
            with cohere_api.calling("embed"):
                response = await self.client.embed(
                    texts=list(texts[begin : begin + 96]),
                    model=self._model_id,
                    input_type=input_type.value,
                    embedding_types=["float"],
                )
            vectors.extend(response.embeddings.float_ or [])
        array = np.asarray(vectors, dtype=np.float32)
        unit: np.ndarray = array / np.clip(
            np.linalg.norm(array, axis=1, keepdims=True), 1e-12, None
        )
        return unit


@dataclass(frozen=True)
class Making:
    """What a backend is made from: the settings, and who is told of each local model call."""

    settings: EmbedderSettings
    on_call: CallObserver | None = None


def _local(making: Making) -> Embedder:
    s = making.settings
    return LocalEmbedder(
        s.model,
        s.threads,
        s.batch_size,
        s.flush_ms,
        s.gather,
        s.query_threads,
        making.on_call,
        s.batch_nice,
        s.bus.tenant_weights,
    )


#: Every backend, and how the settings make it; ``auto``: Cohere with a Cohere key, else an
#: OpenAI-compatible server where its URL is set, else the local model.
BACKENDS: Registry[EmbedBackend, Making, Embedder] = Registry(
    "embedding backend",
    EmbedBackend,
    {
        EmbedBackend.COHERE: Variant(
            lambda m: CohereEmbedder(m.settings.cohere),
            "Cohere's embed API",
            auto_when=lambda m: m.settings.cohere.api_key is not None,
            remote=True,
        ),
        EmbedBackend.OPENAI: Variant(
            lambda m: OpenAIEmbedder(m.settings.openai),
            "an OpenAI-compatible /embeddings server",
            auto_when=lambda m: m.settings.openai.url is not None,
            remote=True,
        ),
        EmbedBackend.LOCAL: Variant(_local, "a packaged or local ONNX encoder", lambda m: True),
    },
)


def create_embedder(settings: EmbedderSettings, on_call: CallObserver | None = None) -> Embedder:
    """The configured backend (``on_call`` is told the number of texts of each local model call
    for documents)."""
    return BACKENDS.create(settings.backend, Making(settings, on_call))


def document_text(document: DocumentRef, chunk: Chunk, include_title: bool) -> str:
    """What is embedded for a chunk: its context (title, headings) and its text."""
    if not include_title:
        return chunk.text
    return passage_text(document.title, chunk.heading_path, chunk.text)
