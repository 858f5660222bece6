"""What a search costs (kbus_searcher.search.pricing): an ordinary search is the unit, every
figure a request can raise raises its estimate, and what a search did is charged."""

from __future__ import annotations

import random

import pytest
from kbus_contract import SearchRequest
from kbus_searcher.search.pricing import Pricing
from kbus_searcher.settings import SearcherSettings

PRICING = Pricing(SearcherSettings())


def _request(**fields: object) -> SearchRequest:
    return SearchRequest.model_validate(
        {"tenant": "acme", "libraries": ["lib"], "query": "how do I reset my password", **fields}
    )


def test_an_ordinary_search_costs_about_one_and_the_costliest_many() -> None:
    assert PRICING.estimate(_request()) == pytest.approx(1.0, abs=0.1)
    costly = _request(
        query="word " * 300, k=100, rerank_depth=50, budget_tokens=32_768, expand="document"
    )
    assert PRICING.estimate(costly) > 10


@pytest.mark.parametrize("seed", range(20))
def test_asking_for_more_never_costs_less(seed: int) -> None:
    rng = random.Random(seed)
    k, depth, query = rng.randint(1, 50), rng.randint(1, 25), "word " * rng.randint(1, 100)
    base: dict[str, object] = {"k": k, "rerank_depth": depth, "query": query}
    more: dict[str, object] = {
        "k": k + rng.randint(1, 50),
        "rerank_depth": depth + rng.randint(1, 25),
        "query": query + "more " * rng.randint(1, 100),
    }
    for field in more:
        assert PRICING.estimate(_request(**{**base, field: more[field]})) >= PRICING.estimate(
            _request(**base)
        ), field
    assert PRICING.estimate(_request(**base, budget_tokens=8_000, expand="document")) > (
        PRICING.estimate(_request(**base))
    )


def test_what_a_search_did_is_what_it_is_charged() -> None:
    light = Pricing.measured(5.0, candidates=20, read=23, context_tokens=0, reranked=5, query="q")
    heavy = Pricing.measured(
        5.0, candidates=400, read=3_000, context_tokens=32_768, reranked=50, query="q" * 900
    )
    assert light.measured == pytest.approx(1.0, abs=0.1)
    assert heavy.measured > 10
    assert (heavy.estimate, heavy.read, heavy.reranked) == (5.0, 3_000, 50)
