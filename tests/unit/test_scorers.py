"""Every local scorer the reranker ships, through ``create_scorer`` as the service builds it,
on its real model: the passage that answers scores highest, and scores keep the passages'
order whatever their batch."""

from __future__ import annotations

import numpy as np
import pytest
from kbus_reranker.scoring import BACKENDS, create_scorer
from kbus_reranker.settings import RerankBackend, RerankerSettings

from tests.helpers import PASSAGES

QUERY = "Does the receptor protect mice from obesity?"


@pytest.mark.parametrize("backend", BACKENDS.local())
def test_each_local_scorer_ranks_the_answer_first(backend: RerankBackend) -> None:
    scorer = create_scorer(RerankerSettings(backend=backend, threads=1))
    assert scorer.local
    scores = scorer.score(QUERY, PASSAGES)
    assert scores.shape == (len(PASSAGES),)
    assert int(np.argmax(scores)) == 1
    alone = [float(scorer.score(QUERY, [p])[0]) for p in PASSAGES]
    assert np.allclose(scores, alone, atol=1e-3)


def test_auto_without_a_cohere_key_is_maxsim() -> None:
    scorer = create_scorer(RerankerSettings(backend=RerankBackend.AUTO))
    assert type(scorer).__name__ == "MaxSimScorer"
