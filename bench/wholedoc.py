"""``python -m bench.wholedoc``: document-level signals beside the chunk vectors, side by side.

A document cut into chunks is never compared with a query as a whole. This measures, on a split
of a BEIR dataset already indexed by ``kbus eval`` and in a query style of kbus_cli.styles, the
first stage's document ranking (a document at its best chunk, as ``group_by_document`` ranks
it) against rankings that also use the whole document:

- ``chunks``: a document's score adds ``gamma`` times the scores of its other candidate chunks;
- ``docvec``: the cosine of the query with the document's vector (the mean of its chunk vectors,
  normalised), min-max normalised over the candidate documents and blended with weight ``w``.

Every variant ranks the same candidates (one search per query through the bus, hybrid or
vector, no rerank, no floor), so the differences are the signals' alone. Prints nDCG@10.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from kbus_cli.evaluation import Dataset
from kbus_cli.metrics import ndcg_at
from kbus_client import KbClient
from kbus_contract import EmbedReply, EmbedRequest, InputType
from kbus_contract.topology import Topology
from kbus_contract.wire import request
from kbus_runtime.settings import StoreSettings
from kbus_runtime.store import weaviate_client

CANDIDATES = 40


async def document_vectors(collection: str, tenant: str, library: str) -> dict[str, np.ndarray]:
    """Each document's vector: the normalised mean of its chunk vectors."""
    client = weaviate_client(StoreSettings(collection=collection))
    await client.connect()
    try:
        alias = await client.alias.get(alias_name=collection)
        name = alias.collection if alias else collection
        handle = client.collections.use(name).with_tenant(tenant)
        sums: dict[str, np.ndarray] = {}
        async for obj in handle.iterator(
            include_vector=True, return_properties=["library", "document_id"]
        ):
            if obj.properties["library"] != library:
                continue
            vector = np.asarray(obj.vector["chunk"], dtype=np.float32)
            doc = str(obj.properties["document_id"])
            sums[doc] = sums.get(doc, 0) + vector
    finally:
        await client.close()
    return {d: v / max(1e-12, float(np.linalg.norm(v))) for d, v in sums.items()}


async def candidates(
    kb: KbClient, library: str, data: Dataset, search_type: str
) -> dict[str, tuple[np.ndarray, list[tuple[str, float]]]]:
    """Per query: its vector, and the candidate chunks as (document, first-stage score)."""
    limit = asyncio.Semaphore(4)
    out: dict[str, tuple[np.ndarray, list[tuple[str, float]]]] = {}

    async def one(qid: str, text: str) -> None:
        async with limit:
            embedded = await request(
                kb.nc,
                Topology().subject("kb.embed", tenant="_"),
                EmbedRequest(texts=(text,), input_type=InputType.QUERY),
                EmbedReply,
                stage="embedder",
                timeout_s=60,
            )
            reply = await kb.search(
                text,
                libraries=[library],
                k=CANDIDATES,
                search_type=search_type,
                exclude_documents=data.excluded.get(qid, ()),
                rerank=False,
                min_similarity=-1,
                timeout_s=120,
            )
        chunks = [(h.document_id, h.scores.final) for h in reply.results]
        out[qid] = (np.asarray(embedded.vectors[0], dtype=np.float32), chunks)

    await asyncio.gather(*(one(q, data.queries[q]) for q in data.qrels))
    return out


def rank_chunks(chunks: list[tuple[str, float]], gamma: float) -> list[str]:
    """Documents by best chunk score plus ``gamma`` times their other chunks' scores."""
    by_doc: dict[str, list[float]] = defaultdict(list)
    for doc, score in chunks:
        by_doc[doc].append(score)
    scored = {d: max(s) + gamma * (sum(s) - max(s)) for d, s in by_doc.items()}
    return sorted(scored, key=lambda d: -scored[d])


def rank_docvec(
    chunks: list[tuple[str, float]],
    query: np.ndarray,
    vectors: dict[str, np.ndarray],
    weight: float,
) -> list[str]:
    """Documents by ``(1-w) * best chunk score + w * minmax(cos(query, document vector))``."""
    best: dict[str, float] = {}
    for doc, score in chunks:
        best[doc] = max(best.get(doc, score), score)
    cosines = {d: float(vectors[d] @ query) if d in vectors else 0.0 for d in best}
    lo, hi = min(cosines.values(), default=0.0), max(cosines.values(), default=0.0)
    span = hi - lo or 1.0
    scored = {d: (1 - weight) * best[d] + weight * (cosines[d] - lo) / span for d in best}
    return sorted(scored, key=lambda d: -scored[d])


def report(
    found: dict[str, tuple[np.ndarray, list[tuple[str, float]]]],
    qrels: dict[str, dict[str, int]],
    vectors: dict[str, np.ndarray],
) -> dict[str, float]:
    variants: dict[str, Any] = {"best chunk": lambda q, c: rank_chunks(c, 0.0)}
    for gamma in (0.1, 0.25, 0.5):
        variants[f"chunks gamma {gamma}"] = lambda q, c, g=gamma: rank_chunks(c, g)
    for weight in (0.1, 0.2, 0.3, 0.5):
        variants[f"docvec w {weight}"] = lambda q, c, w=weight: rank_docvec(c, q, vectors, w)
    scores = {}
    for name, rank in variants.items():
        values = [ndcg_at(rank(q, c), qrels[qid], 10) for qid, (q, c) in found.items()]
        scores[name] = float(np.mean(values)) if values else 0.0
    return scores


async def main_async(args: argparse.Namespace) -> None:
    data = Dataset.load(args.dataset, args.split, args.max_queries).with_style(args.style)
    vectors = await document_vectors(args.collection, args.tenant, args.library)
    kb = await KbClient.connect(args.nats_url, tenant=args.tenant)
    try:
        for search_type in args.search_type:
            found = await candidates(kb, args.library, data, search_type)
            print(f"{data.name} {args.split} {args.style} {search_type}: {len(found)} queries")
            for name, value in report(found, data.qrels, vectors).items():
                print(f"  {name:24} nDCG@10 {value:.4f}")
    finally:
        await kb.close()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.wholedoc", description=__doc__)
    p.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    p.add_argument("--split", default="train")
    p.add_argument("--style", default="question")
    p.add_argument("--search-type", action="append", default=None)
    p.add_argument("--library", required=True)
    p.add_argument("--tenant", default="eval")
    p.add_argument("--collection", default="KbusChunks")
    p.add_argument("--nats-url", default="nats://127.0.0.1:4222")
    p.add_argument("--max-queries", type=int, default=None)
    args = p.parse_args()
    args.search_type = args.search_type or ["hybrid", "vector"]
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
