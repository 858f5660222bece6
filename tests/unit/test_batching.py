"""Batching: concurrent callers share a call, each gets its own outcome (the embedder's model
calls and the indexer's writes both go through :class:`kbus_runtime.batching.Batcher`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from kbus_runtime.batching import Batcher

Rows = list[tuple[float, int]]


class Model:
    """Embeds each message's texts as [text, call number]; remembers each call's text count."""

    def __init__(self, fail: bool = False, seconds: float = 0.01) -> None:
        self.calls: list[int] = []
        self.times: list[float] = []
        self.fail = fail
        self.seconds = seconds
        self.running = 0
        self.most_running = 0

    async def __call__(self, messages: list[list[str]]) -> list[Rows]:
        self.calls.append(sum(len(m) for m in messages))
        self.times.append(asyncio.get_running_loop().time())
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        await asyncio.sleep(self.seconds)
        self.running -= 1
        if self.fail:
            raise RuntimeError("model down")
        return [[(float(t), len(self.calls)) for t in m] for m in messages]


def texts_batcher(
    model: Model, max_texts: int, wait_s: float, in_flight: int = 1
) -> Batcher[list[str], Rows]:
    return Batcher(model, max_size=max_texts, linger_s=wait_s, in_flight=in_flight, size=len)


class Store:
    """Records each batch; an item named "bad" ends with its own error."""

    def __init__(self, *, down: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.down = down

    async def __call__(self, items: list[str]) -> Sequence[Exception | None]:
        self.batches.append(list(items))
        await asyncio.sleep(0.02)
        if self.down:
            raise ConnectionError("store down")
        return [ValueError(f"{i} refused") if i == "bad" else None for i in items]


# -- sized items (the embedder: messages of several texts, a batch of up to N texts) --------


async def test_concurrent_callers_share_one_call_and_get_their_own_rows() -> None:
    model = Model()
    sizes: list[int] = []
    batcher: Batcher[list[str], Rows] = Batcher(
        model, max_size=32, linger_s=0.05, size=len, on_batch=sizes.append
    )
    parts = [[str(10 * i + j) for j in range(3)] for i in range(5)]
    results = await asyncio.gather(*(batcher.submit(p) for p in parts))
    assert model.calls == [15]
    assert sizes == [15]
    for part, rows in zip(parts, results, strict=True):
        assert [row[0] for row in rows] == [float(t) for t in part]


async def test_a_full_batch_goes_at_once_and_whole_messages_are_never_split() -> None:
    model = Model()
    batcher = texts_batcher(model, 4, 1.0)
    started = asyncio.get_running_loop().time()
    results = await asyncio.gather(*(batcher.submit([str(i), str(i)]) for i in range(3)))
    # 2 + 2 filled a batch, which went without waiting; the third message waited its deadline.
    assert model.calls == [4, 2]
    assert model.times[0] - started < 0.5
    assert model.times[1] - started >= 1.0
    assert [[row[0] for row in r] for r in results] == [[0, 0], [1, 1], [2, 2]]


async def test_a_message_larger_than_a_batch_goes_alone() -> None:
    model = Model()
    batcher = texts_batcher(model, 2, 0.01)
    await asyncio.gather(batcher.submit(["1"]), batcher.submit(["2", "3", "4"]))
    assert model.calls == [1, 3]


async def test_a_lone_caller_waits_no_longer_than_the_deadline() -> None:
    model = Model()
    batcher = texts_batcher(model, 32, 0.02)
    started = asyncio.get_running_loop().time()
    await batcher.submit(["1"])
    assert asyncio.get_running_loop().time() - started < 1.0
    assert model.calls == [1]


async def test_a_failed_call_fails_every_caller_in_it() -> None:
    batcher = texts_batcher(Model(fail=True), 32, 0.01)
    results = await asyncio.gather(
        batcher.submit(["1"]), batcher.submit(["2"]), return_exceptions=True
    )
    assert all(isinstance(r, RuntimeError) for r in results)
    with pytest.raises(RuntimeError):
        await batcher.submit(["3"])


@pytest.mark.parametrize("in_flight", [1, 2])
async def test_calls_in_flight_are_bounded_and_later_texts_join_the_next_call(
    in_flight: int,
) -> None:
    model = Model(seconds=0.2)
    batcher = texts_batcher(model, 2, 0.01, in_flight=in_flight)
    parts = [[str(i)] for i in range(8)]
    results = await asyncio.gather(*(batcher.submit(p) for p in parts))
    assert model.most_running == in_flight
    assert model.calls == [2, 2, 2, 2]
    # With a second call queued, the next one starts before the first has finished.
    assert (model.times[1] - model.times[0] < 0.1) == (in_flight == 2)
    assert [[row[0] for row in r] for r in results] == [[float(i)] for i in range(8)]


async def test_a_failed_call_frees_its_slot() -> None:
    model = Model(fail=True)
    batcher = texts_batcher(model, 32, 0.01, in_flight=1)
    for text in ("1", "2", "3"):
        with pytest.raises(RuntimeError):
            await asyncio.wait_for(batcher.submit([text]), 5)
    assert model.calls == [1, 1, 1]


# -- items one each (the indexer: one batch at a time, no linger unless asked) -------------


async def test_a_lone_item_goes_at_once_and_later_arrivals_share_the_next_batch() -> None:
    store = Store()
    batcher: Batcher[str, None] = Batcher(store, max_size=64)
    first = asyncio.create_task(batcher.submit("a"))
    await asyncio.sleep(0.005)  # "a" is being written
    later = [asyncio.create_task(batcher.submit(x)) for x in "bcd"]
    await asyncio.gather(first, *later)
    assert store.batches == [["a"], ["b", "c", "d"]]


async def test_items_handed_in_together_share_a_batch_up_to_the_limit() -> None:
    store = Store()
    batcher: Batcher[str, None] = Batcher(store, max_size=2)
    await asyncio.gather(*(batcher.submit(x) for x in "abcde"))
    assert store.batches == [["a", "b"], ["c", "d"], ["e"]]


async def test_each_caller_gets_its_own_outcome() -> None:
    store = Store()
    batcher: Batcher[str, None] = Batcher(store, max_size=64)
    results = await asyncio.gather(
        *(batcher.submit(x) for x in ["ok", "bad", "fine"]), return_exceptions=True
    )
    assert results[0] is None
    assert isinstance(results[1], ValueError)
    assert str(results[1]) == "bad refused"
    assert results[2] is None
    assert store.batches == [["ok", "bad", "fine"]]


async def test_a_failed_batch_fails_each_of_its_callers_and_the_next_batch_still_runs() -> None:
    store = Store(down=True)
    batcher: Batcher[str, None] = Batcher(store, max_size=64)
    with pytest.raises(ConnectionError):
        await asyncio.gather(batcher.submit("a"), batcher.submit("b"))
    store.down = False
    await batcher.submit("c")
    assert store.batches == [["a", "b"], ["c"]]


async def test_items_arriving_within_the_linger_join_and_a_full_batch_does_not_wait() -> None:
    store = Store()
    batcher: Batcher[str, None] = Batcher(store, max_size=3, linger_s=0.2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    first = asyncio.create_task(batcher.submit("a"))
    await asyncio.sleep(0.05)
    await asyncio.gather(first, batcher.submit("b"), batcher.submit("c"))
    # "b" and "c" came within the linger; the third item filled the batch, which went at once.
    assert store.batches == [["a", "b", "c"]]
    assert loop.time() - started < 0.15
    started = loop.time()
    await batcher.submit("d")
    assert store.batches[-1] == ["d"]
    assert loop.time() - started >= 0.2  # a lone item waits out the linger


async def test_a_cancelled_caller_does_not_disturb_the_others() -> None:
    store = Store()
    batcher: Batcher[str, None] = Batcher(store, max_size=64, linger_s=0.05)
    gone = asyncio.create_task(batcher.submit("gone"))
    kept = asyncio.create_task(batcher.submit("kept"))
    await asyncio.sleep(0.01)
    gone.cancel()
    await kept
    assert not kept.cancelled()
    assert gone.cancelled()
    assert store.batches == [["gone", "kept"]]


async def test_another_key_s_item_waits_one_call_not_all_of_the_first_key_s() -> None:
    """Ten items of one tenant, then one of another, one item a call: the other's goes in the
    second call (the first was taken before it came), not the eleventh."""
    model = Model()
    batcher = texts_batcher(model, max_texts=1, wait_s=0.0)
    flood = [asyncio.create_task(batcher.submit([str(n)], "acme")) for n in range(10)]
    await asyncio.sleep(0)  # the flood is queued, its first call under way
    other = await batcher.submit(["99"], "globex")
    await asyncio.gather(*flood)
    [(_, call)] = other
    assert call <= 2, f"the other tenant's item went in call {call}"
    together = texts_batcher(Model(), max_texts=1, wait_s=0.0)
    same = [asyncio.create_task(together.submit([str(n)], "acme")) for n in range(3)]
    assert [r[0][1] for r in await asyncio.gather(*same)] == [1, 2, 3]  # one key: in order


async def test_keys_take_the_calls_in_turn_by_how_much_of_them_they_take() -> None:
    """A tenant whose items fill a call gets one call for another's many small items: each
    key's share of the calls is counted in texts, not in items."""
    model = Model(seconds=0.001)
    batcher = texts_batcher(model, max_texts=8, wait_s=0.0)
    done: dict[str, int] = {"large": 0, "small": 0}
    half = asyncio.Event()
    seen: dict[str, int] = {}

    async def submit(texts: list[str], key: str) -> None:
        await batcher.submit(texts, key)
        done[key] += len(texts)
        if done["small"] >= 80 and not half.is_set():
            seen.update(done)
            half.set()

    large = [asyncio.create_task(submit(["1"] * 8, "large")) for _ in range(20)]
    small = [asyncio.create_task(submit(["2"], "small")) for _ in range(160)]
    await half.wait()
    assert abs(seen["large"] - seen["small"]) <= 16, seen
    await asyncio.gather(*large, *small)


async def test_within_a_key_an_urgent_item_goes_before_the_others() -> None:
    model = Model()
    batcher = texts_batcher(model, max_texts=1, wait_s=0.0)
    bulk = [asyncio.create_task(batcher.submit([str(n)], "acme")) for n in range(6)]
    await asyncio.sleep(0)
    edit = await batcher.submit(["99"], "acme", urgent=True)
    await asyncio.gather(*bulk)
    [(_, call)] = edit
    assert call <= 2, f"the urgent item went in call {call}"
