"""The MaxSim re-scorer: late interaction over the packaged encoder's token states."""

from __future__ import annotations

import numpy as np
import pytest
from kbus_reranker.scoring import MaxSimScorer

from tests.helpers import PASSAGES


@pytest.fixture(scope="module")
def scorer() -> MaxSimScorer:
    return MaxSimScorer("all-MiniLM-L6-v2", threads=1, batch_size=2)


def test_the_passage_that_answers_scores_highest(scorer: MaxSimScorer) -> None:
    scores = scorer.score("Does the receptor protect mice from obesity?", PASSAGES)
    assert int(np.argmax(scores)) == 1


def test_a_score_is_the_mean_of_each_query_tokens_best_match(scorer: MaxSimScorer) -> None:
    query = "receptor obesity"
    q_states, q_mask, _ = scorer.encoder.token_states([query])
    p_states, p_mask, _ = scorer.encoder.token_states([PASSAGES[1]])
    q = q_states[0, : int(q_mask[0].sum())]
    p = p_states[0, : int(p_mask[0].sum())]
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    p = p / np.linalg.norm(p, axis=1, keepdims=True)
    by_hand = float((q @ p.T).max(axis=1).mean())
    assert scorer.score(query, [PASSAGES[1]])[0] == pytest.approx(by_hand, abs=1e-5)


def test_batching_and_order_do_not_change_scores(scorer: MaxSimScorer) -> None:
    query = "budget approved by the committee"
    together = scorer.score(query, PASSAGES)
    alone = [scorer.score(query, [p])[0] for p in PASSAGES]
    reversed_ = scorer.score(query, PASSAGES[::-1])[::-1]
    assert np.allclose(together, alone, atol=1e-4)
    assert np.allclose(together, reversed_, atol=1e-4)
