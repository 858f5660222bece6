"""``python -m bench.compression``: what compressing the vectors in Weaviate does to quality.

The same chunks and vectors kbus makes (the ingestor's chunker, the embedder's model) go into
one collection per vector index: HNSW with the full vectors, and HNSW with product (PQ), binary
(BQ) and rotational (RQ, 8 and 1 bits) quantization. SciFact's train queries (choices are made
on train) search each one, by vector alone and hybrid at the searcher's default alpha; a
query's ranking is its chunks' documents in order, each document once. Prints nDCG@10 per
index and the bytes each vector takes in memory.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import weaviate
from kbus_cli.metrics import ndcg_at
from kbus_dev.servers import start_weaviate
from kbus_embedder.embedding import document_text
from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.profiling import Cutter
from kbus_models.encoder import MINILM, Encoder, resolve
from kbus_searcher.settings import SearcherSettings
from weaviate.classes.config import Configure, DataType, Property, VectorDistances
from weaviate.classes.data import DataObject

from bench.corpus import as_added
from tests.cutting import chunk_document

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"
DIMENSION = 384

#: Each index's quantizer and what a vector of 384 floats takes in memory with it (the HNSW
#: graph's links come on top, the same for every index).
INDEXES: dict[str, tuple[Any, int]] = {
    "hnsw": (None, DIMENSION * 4),
    "pq": (Configure.VectorIndex.Quantizer.pq(segments=96, training_limit=5_000), 96),
    "bq": (Configure.VectorIndex.Quantizer.bq(), DIMENSION // 8),
    "rq8": (Configure.VectorIndex.Quantizer.rq(bits=8), DIMENSION),
    "rq1": (Configure.VectorIndex.Quantizer.rq(bits=1), DIMENSION // 8),
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compression")
    parser.add_argument("--documents", type=int, default=2_000, help="0: the whole corpus")
    parser.add_argument("--queries", type=int, default=300, help="train queries asked")
    parser.add_argument("--data", type=Path, default=SCIFACT)
    parser.add_argument("--out", type=Path, default=Path("compression-results.json"))
    args = parser.parse_args()
    qrels = _qrels(args.data / "qrels" / "train.tsv")
    queries = _queries(args.data / "queries.jsonl", qrels, args.queries)
    docs = _documents(args.data / "corpus.jsonl", qrels, queries, args.documents)
    print(f"{len(docs)} documents, {len(queries)} train queries", flush=True)
    results = _run(docs, queries, qrels)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    judged: dict[str, dict[str, int]] = {}
    with path.open() as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            judged.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return judged


def _queries(path: Path, qrels: dict[str, dict[str, int]], count: int) -> dict[str, str]:
    texts = {}
    for line in path.read_text().splitlines():
        query = json.loads(line)
        if query["_id"] in qrels:
            texts[query["_id"]] = query["text"]
    chosen = sorted(texts)[:count] if count else sorted(texts)
    return {q: texts[q] for q in chosen}


def _documents(
    path: Path, qrels: dict[str, dict[str, int]], queries: dict[str, str], count: int
) -> list[dict[str, str]]:
    """Every document judged for the chosen queries, and others drawn at random up to
    ``count`` (a subset chosen by document: the whole corpus is an option)."""
    docs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not count:
        return docs
    judged = {d for q in queries for d in qrels[q]}
    kept = [d for d in docs if d["_id"] in judged]
    others = [d for d in docs if d["_id"] not in judged]
    random.Random(7).shuffle(others)
    return kept + others[: max(0, count - len(kept))]


def _run(
    docs: list[dict[str, str]], queries: dict[str, str], qrels: dict[str, dict[str, int]]
) -> dict[str, Any]:
    encoder = Encoder(resolve(MINILM), threads=0)
    chunks = list(_chunks(docs))
    started = time.perf_counter()
    vectors = encoder.embed([text for _, text in chunks], 32)
    embed_s = time.perf_counter() - started
    asked = encoder.embed([encoder.spec.query_prefix + q for q in queries.values()], 32)
    alpha = SearcherSettings().alpha
    results: dict[str, Any] = {
        "documents": len(docs),
        "chunks": len(chunks),
        "queries": len(queries),
        "alpha": alpha,
        "embed_s": embed_s,
        "indexes": {},
    }
    with tempfile.TemporaryDirectory(prefix="kbus-compression-") as root:
        server = start_weaviate(Path(root))
        client = weaviate.connect_to_local(
            port=server.ports["http"], grpc_port=server.ports["grpc"], skip_init_checks=True
        )
        try:
            for name, (quantizer, vector_bytes) in INDEXES.items():
                scores = _measure(client, name, quantizer, chunks, vectors, queries, asked, qrels)
                results["indexes"][name] = {"vector_bytes": vector_bytes, **scores}
                print(name, results["indexes"][name], flush=True)
        finally:
            client.close()
            server.stop()
    return results


def _chunks(docs: list[dict[str, str]]) -> Iterator[tuple[str, str]]:
    """(document id, the text the embedder embeds) for every chunk, as the pipeline makes
    them."""
    for doc in docs:
        added = as_added(doc, "bench", "bench")
        ready = chunk_document(added, Cutter.recursive(ChunkingConfig()), max_chunks=10_000)
        for chunk in ready.chunks:
            yield doc["_id"], document_text(ready.document, chunk, include_title=True)


def _measure(
    client: Any,
    name: str,
    quantizer: Any,
    chunks: list[tuple[str, str]],
    vectors: np.ndarray,
    queries: dict[str, str],
    asked: np.ndarray,
    qrels: dict[str, dict[str, int]],
) -> dict[str, float]:
    collection = client.collections.create(
        f"Compression{name.capitalize()}{uuid.uuid4().hex[:6]}",
        properties=[
            Property(name="doc", data_type=DataType.TEXT, skip_vectorization=True),
            Property(name="text", data_type=DataType.TEXT),
        ],
        vector_config=Configure.Vectors.self_provided(
            name="chunk",
            vector_index_config=Configure.VectorIndex.hnsw(
                distance_metric=VectorDistances.COSINE, quantizer=quantizer
            ),
        ),
    )
    objects = [
        DataObject(properties={"doc": doc, "text": text}, vector={"chunk": vector.tolist()})
        for (doc, text), vector in zip(chunks, vectors, strict=True)
    ]
    started = time.perf_counter()
    for begin in range(0, len(objects), 500):
        result = collection.data.insert_many(objects[begin : begin + 500])
        if result.has_errors:
            raise RuntimeError(f"{name}: {next(iter(result.errors.values())).message}")
    import_s = time.perf_counter() - started
    _wait_indexed(client, collection.name)
    vector_only, hybrid = [], []
    for (qid, text), vector in zip(queries.items(), asked, strict=True):
        near = collection.query.near_vector(
            near_vector=vector.tolist(), target_vector="chunk", limit=50, return_properties=["doc"]
        )
        both = collection.query.hybrid(
            query=text,
            vector=vector.tolist(),
            target_vector="chunk",
            alpha=SearcherSettings().alpha,
            limit=50,
            return_properties=["doc"],
        )
        vector_only.append(ndcg_at(_ranked(near.objects), qrels[qid], 10))
        hybrid.append(ndcg_at(_ranked(both.objects), qrels[qid], 10))
    client.collections.delete(collection.name)
    return {
        "ndcg10_vector": float(np.mean(vector_only)),
        "ndcg10_hybrid": float(np.mean(hybrid)),
        "import_s": import_s,
    }


def _ranked(objects: list[Any]) -> list[str]:
    """The documents of a ranking of chunks, in order, each once."""
    return list(dict.fromkeys(str(o.properties["doc"]) for o in objects))


def _wait_indexed(client: Any, name: str, timeout_s: float = 300.0) -> None:
    """Until the collection's vector queue is empty (compression applies as it drains)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        nodes = client.cluster.nodes(collection=name, output="verbose")
        shards = [s for node in nodes for s in node.shards or []]
        if shards and all(s.vector_queue_length == 0 for s in shards):
            return
        time.sleep(1.0)


if __name__ == "__main__":
    main()
