"""Hedged requests (kbus_contract.hedging) under random answer times and failures: the first
answer wins, an error is the first try's, and hedges stay within their share."""

from __future__ import annotations

import asyncio
import random

import pytest
from kbus_contract.errors import ErrorCode, TransientError
from kbus_contract.hedging import Hedge, Hedger


class _Replicas:
    """Tries answered after a random time, some never (a replica that holds them), some with
    an error."""

    def __init__(self, rng: random.Random, lost: float, failing: float) -> None:
        self.rng, self.lost, self.failing = rng, lost, failing
        self.sent = 0

    async def ask(self, left_s: float) -> int:
        self.sent += 1
        number = self.sent
        draw = self.rng.random()
        if draw < self.lost:
            await asyncio.sleep(left_s)
            raise TransientError("timed out", code=ErrorCode.unanswered("searcher", timed_out=True))
        await asyncio.sleep(self.rng.uniform(0.0, 0.004))
        if draw < self.lost + self.failing:
            raise TransientError("busy", code=ErrorCode.STORE_ERROR)
        return number


@pytest.mark.parametrize("seed", range(4))
async def test_hedges_answer_lost_tries_within_their_share(seed: int) -> None:
    rng = random.Random(seed)
    policy = Hedge(least_delay_s=0.002, burst=rng.choice([1.0, 5.0, 20.0]), least_try_s=0.01)
    hedger = Hedger(policy)
    replicas = _Replicas(rng, lost=rng.uniform(0.0, 0.1), failing=rng.uniform(0.0, 0.2))
    requests, answered, errors = 400, 0, 0
    codes: set[str] = set()
    for _ in range(requests):
        before = replicas.sent
        try:
            number = await hedger.first("kb.search", replicas.ask, 0.05)
            answered += 1
            assert before < number <= replicas.sent  # an answer to one of this request's tries
        except TransientError as exc:
            errors += 1
            codes.add(exc.code)
            assert replicas.sent > before
    hedges = hedger.sent.get("kb.search", 0)
    assert replicas.sent == requests + hedges
    assert hedges <= policy.share * requests + policy.burst
    assert answered + errors == requests
    assert codes <= {ErrorCode.STORE_ERROR, "searcher_timeout"}


async def test_no_hedge_before_enough_answers_and_the_late_ones_are_asked_again() -> None:
    """Twenty answers first (no hedge meanwhile); then a try that would never answer is
    answered by its hedge well before its time."""
    hedger = Hedger(Hedge(least_delay_s=0.01))
    calls = 0

    async def ask(left_s: float) -> str:
        nonlocal calls
        calls += 1
        if calls == Hedge().warm + 1:  # the first try after the warm-up is held
            await asyncio.sleep(left_s)
            return "held"
        await asyncio.sleep(0.001)
        return "answered"

    for _ in range(Hedge().warm):
        assert await hedger.first("kb.stats", ask, 5.0) == "answered"
    assert hedger.sent == {}
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await hedger.first("kb.stats", ask, 5.0) == "answered"
    assert loop.time() - started < 1.0
    assert hedger.sent == {"kb.stats": 1}
