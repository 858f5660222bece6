"""The peer: LlamaIndex's IngestionPipeline into its WeaviateVectorStore, as its docs show it.

Same corpus, same model (all-MiniLM-L6-v2 on the same onnxruntime encoder, wrapped as a
LlamaIndex embedding), same Weaviate, while kbus's services are up (idle). Chunking is
LlamaIndex's SentenceSplitter at the nearest token size to kbus's 512 characters (128 tokens,
overlap 12).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from kbus_models.encoder import Encoder, resolve

from bench.corpus import Corpus
from bench.floors import QUERY_THREADS
from bench.stats import percentiles


def _embedding(model: str, threads: int) -> Any:
    from llama_index.core.embeddings import BaseEmbedding
    from pydantic import PrivateAttr

    class KbusEncoderEmbedding(BaseEmbedding):  # type: ignore[misc,unused-ignore]
        """The kbus encoder behind LlamaIndex's embedding interface."""

        _encoder: Encoder = PrivateAttr()

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(model_name=model, **kwargs)
            self._encoder = Encoder(resolve(model), threads=threads, lone_threads=QUERY_THREADS)

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._encoder.embed([query])[0].tolist()  # type: ignore[no-any-return]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._encoder.embed([text])[0].tolist()  # type: ignore[no-any-return]

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._encoder.embed(texts).tolist()  # type: ignore[no-any-return]

    return KbusEncoderEmbedding()


class LlamaPeer:
    """LlamaIndex on the same Weaviate: its ingestion, then its retriever, one query at a time.

    Built inside kbus's phase of the run, so its ingestion follows kbus's and its queries
    alternate with kbus's: both see the same machine (runs minutes apart drift by ~10%).
    """

    def __init__(self, http_port: int, grpc_port: int, model: str, threads: int) -> None:
        import weaviate

        self.client = weaviate.connect_to_local(
            port=http_port, grpc_port=grpc_port, skip_init_checks=True
        )
        self.index_name = f"LlamaBench{uuid.uuid4().hex[:8]}"
        self.embed = _embedding(model, threads)
        self.latencies: list[float] = []
        self.ingestion: dict[str, object] = {}
        self._retriever: Any = None

    def ingest(self, corpus: Corpus) -> dict[str, object]:
        """Run the corpus through an IngestionPipeline into a WeaviateVectorStore, timed."""
        from llama_index.core import Document, VectorStoreIndex
        from llama_index.core.ingestion import IngestionPipeline
        from llama_index.core.node_parser import SentenceSplitter
        from llama_index.vector_stores.weaviate import WeaviateVectorStore

        store = WeaviateVectorStore(weaviate_client=self.client, index_name=self.index_name)
        pipeline = IngestionPipeline(
            transformations=[SentenceSplitter(chunk_size=128, chunk_overlap=12), self.embed],
            vector_store=store,
        )
        documents = [
            Document(text=d["text"], metadata={"title": d.get("title", "")}, doc_id=d["_id"])
            for d in corpus.documents
        ]
        started = time.perf_counter()
        nodes = pipeline.run(documents=documents)
        seconds = time.perf_counter() - started
        index = VectorStoreIndex.from_vector_store(store, embed_model=self.embed)
        self._retriever = index.as_retriever(
            similarity_top_k=5, vector_store_query_mode="hybrid", alpha=0.5
        )
        self.ingestion = {
            "documents": len(corpus.documents),
            "chunks": len(nodes),
            "seconds": seconds,
            "documents_per_s": len(corpus.documents) / seconds,
            "chunks_per_s": len(nodes) / seconds,
        }
        return self.ingestion

    def query(self, query: str) -> None:
        """One retrieval, timed."""
        t0 = time.perf_counter()
        self._retriever.retrieve(query)
        self.latencies.append((time.perf_counter() - t0) * 1000)

    def close(self) -> dict[str, object]:
        """Drop its collection; its ingestion and query figures."""
        try:
            self.client.collections.delete(self.index_name)
        finally:
            self.client.close()
        return {**self.ingestion, "query_latency_ms": percentiles(self.latencies)}
