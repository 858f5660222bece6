"""Per-tenant budgets the searcher holds: the work of its searches a second and a chunk count,
each tenant on its own."""

from __future__ import annotations

import contextlib

import pytest
from kbus_contract.errors import PermanentError, TransientError
from kbus_contract.topology import Topology
from kbus_runtime.budgets import Budgets, BudgetSettings, TenantBudget
from kbus_searcher.state.quotas import BURST_S, CONTENDED_S, COUNT_TTL_S, Quotas


def budgets(named: dict[str, TenantBudget], default: TenantBudget | None = None) -> Budgets:
    settings = BudgetSettings(
        tenant_budgets=named, default_budget=default or TenantBudget.of(search_cost_per_second=0)
    )
    return Budgets(settings, Topology())


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_tenant_over_its_search_rate_is_refused_and_the_others_are_not() -> None:
    clock = Clock()
    quotas = Quotas(budgets({"acme": TenantBudget.of(search_cost_per_second=2)}), clock=clock)
    quotas.take_search("globex")  # another tenant searches here too
    for _ in range(int(2 * BURST_S)):  # a burst of its rate's few seconds' worth
        quotas.take_search("acme")
    with pytest.raises(TransientError) as refused:
        quotas.take_search("acme")
    assert refused.value.code == "quota_exceeded"
    assert refused.value.retry_after_s == pytest.approx(0.5)
    for _ in range(100):
        quotas.take_search("globex")  # no limit of its own, none by default
    clock.now += 0.5
    quotas.take_search("acme")  # one search's worth refilled


async def test_chunks_past_a_tenant_s_limit_are_refused_and_counted_otherwise() -> None:
    counted: list[str] = []

    async def stored(tenant: str) -> int:
        counted.append(tenant)
        return 90

    clock = Clock()
    quotas = Quotas(budgets({}, TenantBudget.of(chunks=100)), stored, clock=clock)
    await quotas.admit_chunks("acme", 6)
    with pytest.raises(PermanentError, match="96 chunks; 6 more would pass its budget") as refused:
        await quotas.admit_chunks("acme", 6)
    assert refused.value.code == "quota_exceeded"
    assert counted == ["acme"]  # read once, then counted here
    clock.now += 10
    await quotas.admit_chunks("acme", 10)  # read again: the store says 90
    assert counted == ["acme", "acme"]


def test_a_costly_search_takes_that_much_of_its_tenant_s_seconds() -> None:
    clock = Clock()
    quotas = Quotas(budgets({"acme": TenantBudget.of(search_cost_per_second=10)}), clock=clock)
    quotas.take_search("globex")
    # More than the bucket holds: it runs once the bucket is full, and leaves it in debt.
    quotas.take_search("acme", 10 * BURST_S + 30.0)
    with pytest.raises(TransientError, match="this search's is 1 and 0 is left") as refused:
        quotas.take_search("acme", 1.0)
    assert refused.value.retry_after_s == pytest.approx(3.1)
    clock.now += 3.2
    quotas.take_search("acme", 1.0)


def test_a_search_is_charged_what_it_measured_once_it_ran() -> None:
    clock = Clock()
    quotas = Quotas(budgets({"acme": TenantBudget.of(search_cost_per_second=10)}), clock=clock)
    quotas.take_search("globex")
    quotas.take_search("acme", 2.0)
    quotas.settle_search("acme", 10 * BURST_S)  # it read far more than its request said
    with pytest.raises(TransientError):
        quotas.take_search("acme", 1.0)
    quotas.forget_idle()
    clock.now += 2 * BURST_S + 1
    quotas.forget_idle()
    assert not quotas._buckets  # full again: nothing kept of an idle tenant


def test_a_tenant_searching_alone_is_charged_but_held_to_its_rate_only_once_another_comes() -> None:
    clock = Clock()
    quotas = Quotas(budgets({}, TenantBudget.of(search_cost_per_second=2)), clock=clock)
    for _ in range(100):
        quotas.take_search("acme")  # alone: nobody waits for it
    quotas.check_search("globex")  # another comes (its own bucket is full)
    with pytest.raises(TransientError, match="search_cost_per_second"):
        quotas.check_search("acme")
    clock.now += CONTENDED_S + 1  # the other left long ago: alone again
    quotas.take_search("acme")


def test_a_budget_names_only_resources_there_are() -> None:
    with pytest.raises(ValueError, match="searches_per_second"):
        TenantBudget.of(searches_per_second=2)


async def test_what_is_held_follows_active_tenants_not_every_tenant_ever_seen() -> None:
    """Thousands of tenants search and store, a few at a time, at random: once each has been
    idle for a while, the quotas hold nothing of it (their memory follows active tenants)."""
    import random

    rng = random.Random(66)
    clock = Clock()

    async def count(tenant: str) -> int:
        return 0

    quotas = Quotas(
        budgets({}, TenantBudget.of(search_cost_per_second=2, chunks=10_000)),
        count_chunks=count,
        clock=clock,
    )
    for step in range(3_000):
        tenant = f"t{rng.randrange(5_000)}"
        with contextlib.suppress(TransientError):
            quotas.take_search(tenant, rng.uniform(0.1, 20))
        await quotas.admit_chunks(tenant, rng.randint(1, 50))
        clock.now += rng.uniform(0, 0.05)
        if step % 100 == 0:
            quotas.forget_idle()
    quotas.forget_idle()
    assert quotas.held() > 10
    clock.now += max(CONTENDED_S, COUNT_TTL_S, 20 * BURST_S) + 1
    quotas.forget_idle()
    assert quotas.held() == 0
