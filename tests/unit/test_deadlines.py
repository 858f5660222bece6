"""Deadlines: budgets handed on, timeouts capped by what is left, the reranker skipped or given
up on when it would not fit, and work cut short when the caller has gone.

The bus is a stand-in that records what the second stage asked and waits as long as told; the
decisions are the real code's (tests/e2e/test_deadlines.py runs them against the services).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from kbus_contract import MAX_BUDGET_MS, DegradedReason, RerankReply, RerankRequest, SearchRequest
from kbus_contract.errors import TransientError
from kbus_contract.topology import Topology
from kbus_contract.wire import DEFAULT_WAIT_S, budget_ms
from kbus_runtime.answering import Inbound
from kbus_runtime.deadlines import Deadline
from kbus_searcher.search.budgeting import RerankCost
from kbus_searcher.search.chains import Chain
from kbus_searcher.search.second_stage import SecondStage
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store import Candidate


def test_a_deadline_counts_from_receipt_and_caps_timeouts() -> None:
    received = time.monotonic() - 0.3
    deadline = Inbound(b"{}", "kb.rerank", received).deadline(budget_ms=500)
    assert deadline is not None
    assert 0.1 < deadline.left_s() <= 0.2
    assert deadline.cap(10.0) == pytest.approx(deadline.left_s(), abs=0.01)
    assert deadline.cap(0.05) == 0.05
    assert deadline.cap(10.0, reserve_s=1.0) == 0.0
    assert Inbound(b"{}", "kb.rerank").deadline(None) is None
    assert Inbound(b"{}", "kb.rerank").deadline(None, default_ms=7).budget_ms == 7  # type: ignore[union-attr]


def test_an_expired_deadline_refuses_work() -> None:
    deadline = Deadline.after(1, time.monotonic() - 1.0)
    assert deadline.expired()
    assert deadline.left_ms() == 0
    with pytest.raises(TransientError) as info:
        deadline.check("waiting")
    assert info.value.code == "deadline_exceeded"
    Deadline.after(60_000, time.monotonic()).check("waiting")


async def test_bound_cancels_what_runs_past_the_deadline_less_the_reserve() -> None:
    deadline = Deadline.after(200, time.monotonic())
    started = time.monotonic()
    with pytest.raises(TransientError) as info:
        async with deadline.bound("searching", reserve_s=0.1):
            await asyncio.sleep(5)
    assert info.value.code == "deadline_exceeded"
    assert time.monotonic() - started < deadline.at - started  # stopped inside the budget
    async with deadline.bound("searching"):
        await asyncio.sleep(0)


def test_a_clients_budget_leaves_room_for_the_reply() -> None:
    assert budget_ms(DEFAULT_WAIT_S) == int(DEFAULT_WAIT_S * 1000) - 250
    assert budget_ms(0.5) == 450
    assert budget_ms(0.0001) == 1
    assert budget_ms(3_600) == MAX_BUDGET_MS
    assert SearcherSettings().budget_ms == int(DEFAULT_WAIT_S * 1000)


def test_the_rerank_cost_follows_what_reranks_took() -> None:
    cost = RerankCost(weight=0.5)
    assert cost.estimate_s(5) is None
    assert cost.fits(5, 0.0)  # nothing measured yet: try
    cost.observe(10, 1.0)
    assert cost.estimate_s(5) == pytest.approx(0.5)
    cost.observe(10, 3.0)
    assert cost.estimate_s(10) == pytest.approx(2.0)
    assert not cost.fits(10, 1.9)
    assert cost.fits(10, 2.1)
    cost.observe(0, 100.0)  # nothing reranked: nothing learned
    assert cost.estimate_s(10) == pytest.approx(2.0)


@dataclass
class Bus:
    """Answers kb.rerank after ``delay_s``, or raises ``error``; records what was asked."""

    delay_s: float = 0.0
    error: TransientError | None = None
    asked: list[tuple[RerankRequest, float]] = field(default_factory=list)
    topology: Topology = field(default_factory=Topology)

    async def ask(self, subject: str, payload: Any, reply: Any, *, stage: str, timeout_s: float):  # type: ignore[no-untyped-def]
        self.asked.append((payload, timeout_s))
        if self.error is not None:
            raise self.error
        if self.delay_s > timeout_s:
            await asyncio.sleep(timeout_s)
            raise TransientError("too slow", code="reranker_timeout")
        await asyncio.sleep(self.delay_s)
        return RerankReply(model="m", scores=tuple(0.5 for _ in payload.candidates))


def _found(n: int) -> list[Candidate]:
    props = {"title": "T", "heading_path": [], "text": "text"}
    return [Candidate(f"id{i}", props, 1.0, 0.5, 0.5) for i in range(n)]


def _second(bus: Bus, **settings: Any) -> SecondStage:
    return SecondStage(bus, SearcherSettings(reserve_ms=20, **settings))  # type: ignore[arg-type]


async def _rerank(
    second: SecondStage, budget_ms: int, rerank: bool | None = None
) -> tuple[Any, float]:
    request = SearchRequest(tenant="t", libraries=("l",), query="q", rerank=rerank)
    deadline = Deadline.after(budget_ms, time.monotonic())
    reranked = await second.rerank(request, Chain(), "q", _found(8), deadline)
    return reranked, deadline.left_s()


async def test_the_reranker_gets_what_is_left_of_the_budget() -> None:
    bus = Bus(delay_s=0.01)
    reranked, _ = await _rerank(_second(bus, rerank_timeout_s=30.0), budget_ms=2_000)
    assert reranked.scores == [0.5] * 5
    assert reranked.model == "m"
    assert reranked.degraded is None
    [(request, timeout_s)] = bus.asked
    assert timeout_s <= 2.0 - 0.02
    assert request.budget_ms is not None
    assert request.budget_ms <= 1_980


async def test_a_rerank_that_cannot_answer_in_time_is_given_up_then_skipped() -> None:
    bus = Bus(delay_s=1.0)
    second = _second(bus)
    reranked, _ = await _rerank(second, budget_ms=300)
    assert reranked.degraded is DegradedReason.RERANK_TIMEOUT
    assert reranked.scores is None
    [(_, timeout_s)] = bus.asked
    assert timeout_s <= 0.3 - 0.02  # given up before the caller's deadline, the reserve kept
    reranked, _ = await _rerank(second, budget_ms=200)
    assert reranked.degraded is DegradedReason.RERANK_OVER_BUDGET
    assert len(bus.asked) == 1  # the second search did not wait for what would not fit
    reranked, _ = await _rerank(second, budget_ms=60_000)
    assert reranked.degraded is None
    assert reranked.scores is not None


async def test_a_rerank_the_request_insisted_on_fails_instead_of_degrading() -> None:
    second = _second(Bus(delay_s=1.0))
    with pytest.raises(TransientError, match="too slow"):
        await _rerank(second, budget_ms=200, rerank=True)
    gone = _second(Bus(error=TransientError("no reranker", code="reranker_unavailable")))
    reranked, _ = await _rerank(gone, budget_ms=1_000)
    assert reranked.degraded is DegradedReason.RERANK_UNAVAILABLE
