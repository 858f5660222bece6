"""A model's calls given in turn (kbus_runtime.fair_share.FairGate): one tenant's many waits
cost another's one call at most, by weight and by cost, urgent first within a tenant."""

from __future__ import annotations

import asyncio
from collections import Counter

from kbus_runtime.fair_share import FairGate


async def _run(gate: FairGate, tenant: str, order: list[str], cost: float = 1.0) -> None:
    async with gate.turn(tenant, cost):
        order.append(tenant)
        await asyncio.sleep(0.001)


async def test_a_tenant_s_one_call_waits_for_one_of_another_s_many() -> None:
    gate = FairGate(1)
    order: list[str] = []
    flood = [asyncio.create_task(_run(gate, "acme", order)) for _ in range(20)]
    await asyncio.sleep(0)
    await _run(gate, "globex", order)
    await asyncio.gather(*flood)
    assert order.index("globex") <= 2, order


async def test_calls_go_by_weight_and_cost() -> None:
    gate = FairGate(1, {"gold": 3.0})
    order: list[str] = []
    fifty = asyncio.Event()  # the first 50 turns, however long the machine takes

    async def run(tenant: str, cost: float = 1.0) -> None:
        await _run(gate, tenant, order, cost)
        if len(order) >= 50:
            fifty.set()

    tasks = [asyncio.create_task(run("gold")) for _ in range(60)]
    tasks += [asyncio.create_task(run("plain")) for _ in range(60)]
    tasks += [asyncio.create_task(run("costly", cost=3.0)) for _ in range(60)]
    await fifty.wait()
    first = Counter(order[:50])
    await asyncio.gather(*tasks)
    # Weight 3 at cost 1, weight 1 at cost 1, weight 1 at cost 3: 9 to 3 to 1 of the turns.
    assert first["gold"] > first["plain"] > first["costly"], first


async def test_an_urgent_call_goes_first_and_a_cancelled_one_frees_its_turn() -> None:
    gate = FairGate(1)
    order: list[str] = []

    async def run(label: str, urgent: bool = False) -> None:
        async with gate.turn("acme", urgent=urgent):
            order.append(label)
            await asyncio.sleep(0.001)

    bulk = [asyncio.create_task(run(f"bulk{n}")) for n in range(5)]
    gone = asyncio.create_task(run("gone"))
    await asyncio.sleep(0)
    gone.cancel()
    await run("edit", urgent=True)
    await asyncio.gather(*bulk, return_exceptions=True)
    assert order.index("edit") <= 1, order
    assert "gone" not in order
    assert gate.free == 1
