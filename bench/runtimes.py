"""Model runtimes side by side: encode rate and SciFact nDCG@10 of each, in one run.

``python -m bench.runtimes`` embeds every chunk of the corpus (the exact texts the pipeline
embeds) and every test query with each runtime in turn, ranks documents by their best chunk's
cosine (vector mode, exhaustive: no index in the way), and reports chunks per second and
nDCG@10. A faster runtime is only acceptable where nDCG@10 drops by at most 0.005.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from kbus_cli.evaluation import Dataset
from kbus_cli.metrics import evaluate
from kbus_models.encoder import MINILM, MINILM_INT8, Encoder, resolve

from bench.corpus import load as load_corpus

RATE_SAMPLE = 1_000


def rank_documents(
    queries: np.ndarray, chunks: np.ndarray, owners: np.ndarray, k: int = 100
) -> list[list[int]]:
    """For each query, document indexes by their best chunk's cosine, best first."""
    ranked = []
    for row in queries @ chunks.T:
        best: dict[int, float] = {}
        for index in np.argsort(-row)[: k * 8]:
            owner = int(owners[index])
            if owner not in best:
                best[owner] = float(row[index])
        ranked.append(sorted(best, key=lambda d: -best[d])[:k])
    return ranked


def measure(
    model: str,
    texts: list[str],
    owners: np.ndarray,
    questions: list[str],
    ids: list[str],
    data: Dataset,
) -> dict[str, float]:
    encoder = Encoder(resolve(model))
    encoder.embed(texts[:8])  # onnxruntime allocates on the first run
    started = time.perf_counter()
    encoder.embed(texts[:RATE_SAMPLE])
    rate = min(RATE_SAMPLE, len(texts)) / (time.perf_counter() - started)
    vectors = encoder.embed(texts)
    query_vectors = encoder.embed(questions)
    ranked = rank_documents(query_vectors, vectors, owners)
    run = {
        qid: [data.corpus[d]["_id"] for d in docs] for qid, docs in zip(ids, ranked, strict=True)
    }
    return {"chunks_per_s": rate, **evaluate(run, data.qrels)}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.runtimes", description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--out", type=Path, default=Path("bench-results/runtimes.json"))
    args = parser.parse_args()
    data = Dataset.load(args.dataset, "test")
    corpus = load_corpus(args.dataset, None, 0)
    position = {doc["_id"]: i for i, doc in enumerate(data.corpus)}
    texts = corpus.chunk_texts
    owners = np.array([position[r.document.document_id] for r in corpus.chunked for _ in r.chunks])
    ids = sorted(data.qrels)
    questions = [data.queries[q] for q in ids]
    results = {}
    for model in (MINILM, MINILM_INT8):
        results[model] = measure(model, texts, owners, questions, ids, data)
        print(model, json.dumps(results[model]), flush=True)
    fp32, int8 = results[MINILM], results[MINILM_INT8]
    summary = {
        "chunks": len(texts),
        "queries": len(ids),
        "results": results,
        "speedup": int8["chunks_per_s"] / fp32["chunks_per_s"],
        "ndcg_drop": fp32["ndcg@10"] - int8["ndcg@10"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
