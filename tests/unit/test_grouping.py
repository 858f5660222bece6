"""Group commit: items handed in while a batch runs go together in the next batch."""

from __future__ import annotations

import asyncio

import pytest
from kbus_searcher.grouping import GroupCommit


class Store:
    """Records each batch; an item named "bad" ends with its own error."""

    def __init__(self, *, down: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.down = down

    async def __call__(self, items: list[str]) -> list[Exception | None]:
        self.batches.append(list(items))
        await asyncio.sleep(0.02)
        if self.down:
            raise ConnectionError("store down")
        return [ValueError(f"{i} refused") if i == "bad" else None for i in items]


async def test_a_lone_item_goes_at_once_and_later_arrivals_share_the_next_batch() -> None:
    store = Store()
    commit = GroupCommit(store, max_items=64)
    first = asyncio.create_task(commit.submit("a"))
    await asyncio.sleep(0.005)  # "a" is being written
    later = [asyncio.create_task(commit.submit(x)) for x in "bcd"]
    await asyncio.gather(first, *later)
    assert store.batches == [["a"], ["b", "c", "d"]]


async def test_items_handed_in_together_share_a_batch_up_to_the_limit() -> None:
    store = Store()
    commit = GroupCommit(store, max_items=2)
    await asyncio.gather(*(commit.submit(x) for x in "abcde"))
    assert store.batches == [["a", "b"], ["c", "d"], ["e"]]


async def test_each_caller_gets_its_own_outcome() -> None:
    store = Store()
    commit = GroupCommit(store, max_items=64)
    results = await asyncio.gather(
        *(commit.submit(x) for x in ["ok", "bad", "fine"]), return_exceptions=True
    )
    assert results[0] is None
    assert isinstance(results[1], ValueError)
    assert str(results[1]) == "bad refused"
    assert results[2] is None
    assert store.batches == [["ok", "bad", "fine"]]


async def test_a_failed_batch_fails_each_of_its_callers_and_the_next_batch_still_runs() -> None:
    store = Store(down=True)
    commit = GroupCommit(store, max_items=64)
    with pytest.raises(ConnectionError):
        await asyncio.gather(commit.submit("a"), commit.submit("b"))
    store.down = False
    await commit.submit("c")
    assert store.batches == [["a", "b"], ["c"]]


async def test_items_arriving_within_the_linger_join_and_a_full_batch_does_not_wait() -> None:
    store = Store()
    commit = GroupCommit(store, max_items=3, linger_s=0.2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    first = asyncio.create_task(commit.submit("a"))
    await asyncio.sleep(0.05)
    await asyncio.gather(first, commit.submit("b"), commit.submit("c"))
    # "b" and "c" came within the linger; the third item filled the batch, which went at once.
    assert store.batches == [["a", "b", "c"]]
    assert loop.time() - started < 0.15
    started = loop.time()
    await commit.submit("d")
    assert store.batches[-1] == ["d"]
    assert loop.time() - started >= 0.2  # a lone item waits out the linger
