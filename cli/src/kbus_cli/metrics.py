"""Ranking metrics as BEIR's evaluator computes them (pytrec_eval, linear gain)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Sequence[str]]


def ndcg_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """nDCG@k with gain = relevance and discount log2(rank + 1)."""
    dcg = sum(relevant.get(doc, 0) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:k]))
    ideal = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 2) for rank, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Share of the relevant documents found in the top k."""
    wanted = {doc for doc, g in relevant.items() if g > 0}
    return len(wanted & set(ranked[:k])) / len(wanted) if wanted else 0.0


def mrr_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Reciprocal rank of the first relevant document in the top k."""
    for rank, doc in enumerate(ranked[:k]):
        if relevant.get(doc, 0) > 0:
            return 1.0 / (rank + 1)
    return 0.0


def evaluate(run: Run, qrels: Qrels) -> dict[str, float]:
    """Mean nDCG@10, Recall@10, Recall@100 and MRR@10 over the judged queries."""
    queries = [q for q in qrels if any(g > 0 for g in qrels[q].values())]
    if not queries:
        return {"ndcg@10": 0.0, "recall@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}

    def mean(metric: str, k: int) -> float:
        fn = {"ndcg": ndcg_at, "recall": recall_at, "mrr": mrr_at}[metric]
        return sum(fn(run.get(q, ()), qrels[q], k) for q in queries) / len(queries)

    return {
        "ndcg@10": mean("ndcg", 10),
        "recall@10": mean("recall", 10),
        "recall@100": mean("recall", 100),
        "mrr@10": mean("mrr", 10),
    }
