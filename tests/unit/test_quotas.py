"""Per-tenant budgets the searcher holds: a search rate and a chunk count, each tenant on its
own."""

from __future__ import annotations

import pytest
from kbus_contract.errors import PermanentError, TransientError
from kbus_contract.topology import Topology
from kbus_runtime.budgets import Budgets, BudgetSettings, TenantBudget
from kbus_searcher.state.quotas import Quotas


def budgets(named: dict[str, TenantBudget], default: TenantBudget | None = None) -> Budgets:
    settings = BudgetSettings(
        tenant_budgets=named, default_budget=default or TenantBudget(searches_per_second=0)
    )
    return Budgets(settings, Topology())


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_tenant_over_its_search_rate_is_refused_and_the_others_are_not() -> None:
    clock = Clock()
    quotas = Quotas(budgets({"acme": TenantBudget(searches_per_second=2)}), clock=clock)
    quotas.take_search("acme")
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
    quotas = Quotas(budgets({}, TenantBudget(chunks=100)), stored, clock=clock)
    await quotas.admit_chunks("acme", 6)
    with pytest.raises(PermanentError, match="96 chunks; 6 more would pass its budget") as refused:
        await quotas.admit_chunks("acme", 6)
    assert refused.value.code == "quota_exceeded"
    assert counted == ["acme"]  # read once, then counted here
    clock.now += 10
    await quotas.admit_chunks("acme", 10)  # read again: the store says 90
    assert counted == ["acme", "acme"]
