"""Searches first (kbus_searcher.store.pressure): writes go in slices while searches come and
wait while one is in flight; a costly search's reads wait for other tenants' cheap ones."""

from __future__ import annotations

import asyncio

from kbus_searcher.store.pressure import COSTLY_WORK, Pressure


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_write_goes_whole_when_no_search_comes_and_in_slices_while_they_do() -> None:
    clock = Clock()
    pressure = Pressure(recent_s=2.0, slice_objects=32, clock=clock)
    assert pressure.slices(100) == [range(0, 100)]
    with pressure.searching():
        assert pressure.slices(100) == [range(0, 32), range(32, 64), range(64, 96), range(96, 100)]
    clock.now += 1.0
    assert len(pressure.slices(100)) == 4  # a search a moment ago: more are likely
    clock.now += 2.0
    assert pressure.slices(100) == [range(0, 100)]
    pressure.said()  # a query searcher elsewhere answers searches
    assert len(pressure.slices(100)) == 4


async def test_a_write_waits_for_the_searches_in_flight_but_not_forever() -> None:
    pressure = Pressure(most_wait_s=0.2)
    order: list[str] = []

    async def search() -> None:
        with pressure.searching():
            await asyncio.sleep(0.05)
            order.append("search")

    async def write() -> None:
        await asyncio.sleep(0.01)
        await pressure.room_to_write()
        order.append("write")

    await asyncio.gather(search(), write())
    assert order == ["search", "write"]
    with pressure.searching():  # a search that does not end: the write goes after the bound
        loop = asyncio.get_running_loop()
        began = loop.time()
        await pressure.room_to_write()
        assert 0.15 <= loop.time() - began < 1.0


async def test_a_costly_search_reads_after_another_tenant_s_cheap_search() -> None:
    pressure = Pressure(most_wait_s=1.0)
    order: list[str] = []

    async def cheap() -> None:
        with pressure.searching("victim", 1.0):
            await asyncio.sleep(0.05)
            order.append("cheap")

    async def costly(tenant: str) -> None:
        await asyncio.sleep(0.01)
        await pressure.room_to_read(tenant, COSTLY_WORK * 5)
        order.append(f"costly {tenant}")

    await asyncio.gather(cheap(), costly("attacker"))
    assert order == ["cheap", "costly attacker"]
    order.clear()
    # Its own tenant's cheap searches, and cheap reads, wait for nothing.
    await asyncio.gather(cheap(), costly("victim"))
    assert order == ["costly victim", "cheap"]
