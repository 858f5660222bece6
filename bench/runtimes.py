"""Model runtimes side by side: encode rate and SciFact nDCG@10 of each, in one run.

``python -m bench.runtimes`` times the runtimes side by side (the same chunk texts, rounds in
alternating order, the ratio to fp32 from each round's pair), then embeds every chunk of the
corpus (the exact texts the pipeline embeds) and every test query with each runtime, ranks
documents by their best chunk's cosine (vector mode, exhaustive: no index in the way) and
reports nDCG@10. A faster runtime is only acceptable where nDCG@10 drops by at most 0.005.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
from kbus_cli.evaluation import Dataset
from kbus_cli.metrics import evaluate
from kbus_models.encoder import MINILM, MINILM_INT8, MINILM_Q8, Encoder, resolve

from bench.corpus import load as load_corpus
from bench.report import save

RATE_SAMPLE = 300
ROUNDS = 6
MODELS = (MINILM, MINILM_Q8, MINILM_INT8)


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


def rates_side_by_side(
    encoders: dict[str, Encoder], texts: list[str]
) -> dict[str, dict[str, object]]:
    """Chunks per second of each runtime, alternating, and each one's paired ratio to fp32."""
    for encoder in encoders.values():
        encoder.embed(texts[:8])  # onnxruntime allocates on the first run
    rates: dict[str, list[float]] = {model: [] for model in MODELS}
    for round_ in range(ROUNDS):
        order = MODELS if round_ % 2 == 0 else MODELS[::-1]
        for model in order:
            started = time.perf_counter()
            encoders[model].embed(texts)
            rates[model].append(len(texts) / (time.perf_counter() - started))
    return {
        model: {
            "chunks_per_s": rates[model],
            "ratio_to_fp32": statistics.median(
                a / b for a, b in zip(rates[model], rates[MINILM], strict=True)
            ),
        }
        for model in MODELS
    }


def quality(
    encoder: Encoder,
    texts: list[str],
    owners: np.ndarray,
    questions: list[str],
    ids: list[str],
    data: Dataset,
) -> dict[str, float]:
    """nDCG@10 and recall of one runtime, every chunk and query embedded by it."""
    vectors = encoder.embed(texts)
    query_vectors = encoder.embed(questions)
    ranked = rank_documents(query_vectors, vectors, owners)
    run = {
        qid: [data.corpus[d]["_id"] for d in docs] for qid, docs in zip(ids, ranked, strict=True)
    }
    return evaluate(run, data.qrels)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.runtimes", description=__doc__)
    parser.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    parser.add_argument("--out", type=Path, default=Path("bench-results/runtimes.json"))
    parser.add_argument("--rates-only", action="store_true", help="Skip the nDCG@10 runs.")
    args = parser.parse_args()
    data = Dataset.load(args.dataset, "test")
    corpus = load_corpus(args.dataset, None, 0)
    texts = corpus.chunk_texts
    encoders = {model: Encoder(resolve(model)) for model in MODELS}
    summary: dict[str, object] = {"rates": rates_side_by_side(encoders, texts[:RATE_SAMPLE])}
    print(json.dumps(summary["rates"], indent=2), flush=True)
    if not args.rates_only:
        position = {doc["_id"]: i for i, doc in enumerate(data.corpus)}
        owners = np.array(
            [position[r.document.document_id] for r in corpus.chunked for _ in r.chunks]
        )
        ids = sorted(data.qrels)
        questions = [data.queries[q] for q in ids]
        results = {}
        for model in MODELS:
            results[model] = quality(encoders[model], texts, owners, questions, ids, data)
            print(model, json.dumps(results[model]), flush=True)
        summary["quality"] = results
        summary["ndcg_drop"] = {
            model: results[MINILM]["ndcg@10"] - results[model]["ndcg@10"] for model in MODELS
        }
    summary["chunks"] = len(texts)
    save(args.out, summary)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
