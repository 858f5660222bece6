"""The client's asking again: only after retryable errors, never past the wait."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

import pytest
from kbus_client.retrying import Retry, with_retries
from kbus_contract.errors import PermanentError, TransientError


async def test_tries_stop_before_the_wait_is_spent_and_the_error_counts_them() -> None:
    lefts: list[float] = []

    async def attempt(left_s: float) -> None:
        lefts.append(left_s)
        raise TransientError("busy", code="store_error")

    retry = Retry(first_pause_s=0.01, longest_pause_s=0.02, least_try_s=0.05)
    with pytest.raises(TransientError) as raised:
        await with_retries(attempt, 0.3, retry, random.Random(1))
    assert raised.value.tries == len(lefts) > 2
    assert all(left >= retry.least_try_s for left in lefts[1:])
    assert lefts == sorted(lefts, reverse=True)


async def test_a_final_error_or_no_policy_is_one_try() -> None:
    calls = 0

    async def attempt(left_s: float) -> None:
        nonlocal calls
        calls += 1
        raise PermanentError("bad")

    with pytest.raises(PermanentError):
        await with_retries(attempt, 5, Retry())
    with pytest.raises(PermanentError):
        await with_retries(attempt, 5, None)
    assert calls == 2


def test_pauses_are_jittered_under_a_doubling_ceiling_and_honour_retry_after() -> None:
    retry, rng = Retry(first_pause_s=0.1, longest_pause_s=0.3), random.Random(7)
    busy = TransientError("busy")
    pauses = [retry.pause_s(tries, busy, rng) or 0 for tries in (1, 2, 3, 4) for _ in range(50)]
    assert max(pauses[:50]) <= 0.1
    assert max(pauses[50:100]) <= 0.2
    assert max(pauses) <= 0.3
    assert len({round(p, 6) for p in pauses[:50]}) > 40
    assert retry.pause_s(1, TransientError("later", retry_after_s=2.0), rng) == 2.0
    assert retry.pause_s(1, PermanentError("bad"), rng) is None
    assert retry.pause_s(1, TransientError("slow down", code="quota_exceeded"), rng) is None


async def test_a_try_nothing_answers_leaves_time_for_another() -> None:
    """A request lost with a killed replica times out before the wait is spent."""
    given: list[float] = []

    async def attempt(left_s: float) -> str:
        given.append(left_s)
        if len(given) == 1:  # nothing answers: the try runs out its time
            await asyncio.sleep(left_s)
            raise TransientError("no reply in time", code="timeout")
        return "answer"

    retry = Retry(first_pause_s=0.01, least_try_s=0.05, hold_back_share=0.5, hold_back_s=0.2)
    assert await with_retries(attempt, 0.6, retry) == ("answer", 2)
    assert given[0] == pytest.approx(0.4, abs=0.02)
    given.clear()
    with pytest.raises(TransientError):
        await with_retries(attempt, 0.6, replace(retry, hold_back_share=0.0))
    assert len(given) == 1


def test_a_try_is_given_less_as_less_is_left() -> None:
    retry = Retry(least_try_s=0.05)
    lefts = [ms / 1000 for ms in range(10_000, 0, -7)]
    given = [retry.try_s(left) for left in lefts]
    assert given == sorted(given, reverse=True)
    assert all(g <= left for g, left in zip(given, lefts, strict=True))
    assert retry.try_s(10.0) == 7.5  # a quarter held back, at most 2.5 s
    assert retry.try_s(30.0) == 27.5
