"""Ranking metrics on cases small enough to compute by hand."""

from __future__ import annotations

import math

import pytest
from kbus_cli.metrics import evaluate, mrr_at, ndcg_at, recall_at


def test_ndcg_by_hand() -> None:
    # Relevant: a (1), b (1). Ranked: x a y b -> DCG = 1/log2(3) + 1/log2(5).
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 / math.log2(2) + 1 / math.log2(3)
    assert ndcg_at(["x", "a", "y", "b"], {"a": 1, "b": 1}, 10) == pytest.approx(dcg / idcg)
    assert ndcg_at(["a", "b"], {"a": 1, "b": 1}, 10) == pytest.approx(1.0)
    assert ndcg_at(["x"], {"a": 1}, 10) == 0.0


def test_ndcg_uses_linear_gain_and_cuts_at_k() -> None:
    # Graded: a=2, b=1. Ranked b a: DCG = 1 + 2/log2(3); ideal a b: 2 + 1/log2(3).
    expected = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert ndcg_at(["b", "a"], {"a": 2, "b": 1}, 10) == pytest.approx(expected)
    # The relevant document at rank 11 does not count at k=10.
    assert ndcg_at([f"x{i}" for i in range(10)] + ["a"], {"a": 1}, 10) == 0.0


def test_recall_and_mrr() -> None:
    ranked = ["x", "a", "y", "b"]
    assert recall_at(ranked, {"a": 1, "b": 1, "c": 1}, 2) == pytest.approx(1 / 3)
    assert recall_at(ranked, {"a": 1, "b": 1, "c": 1}, 100) == pytest.approx(2 / 3)
    assert mrr_at(ranked, {"b": 1}, 10) == pytest.approx(1 / 4)
    assert mrr_at(ranked, {"b": 1}, 3) == 0.0


def test_evaluate_averages_over_judged_queries_and_counts_missing_runs_as_zero() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    scores = evaluate({"q1": ["a"]}, qrels)
    assert scores["ndcg@10"] == pytest.approx(0.5)  # q1 = 1, q2 = 0; q3 has nothing relevant
    assert scores["mrr@10"] == pytest.approx(0.5)
