"""Micro-batching: concurrent callers share model calls and each gets its own rows back."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from kbus_embedder.batching import MicroBatcher


class Recorder:
    """Embeds a text as [its number, call number]; remembers each call's size."""

    def __init__(self, fail: bool = False, seconds: float = 0.01) -> None:
        self.calls: list[int] = []
        self.times: list[float] = []
        self.fail = fail
        self.seconds = seconds
        self.running = 0
        self.most_running = 0

    async def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        self.times.append(asyncio.get_running_loop().time())
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        await asyncio.sleep(self.seconds)
        self.running -= 1
        if self.fail:
            raise RuntimeError("model down")
        return np.array([[float(t), len(self.calls)] for t in texts])


async def test_concurrent_callers_share_one_call_and_get_their_own_rows() -> None:
    model = Recorder()
    sizes: list[int] = []
    batcher = MicroBatcher(model, max_texts=32, max_wait_s=0.05, on_call=sizes.append)
    parts = [[str(10 * i + j) for j in range(3)] for i in range(5)]
    results = await asyncio.gather(*(batcher.embed(p) for p in parts))
    assert model.calls == [15]
    assert sizes == [15]
    for part, rows in zip(parts, results, strict=True):
        assert rows[:, 0].tolist() == [float(t) for t in part]


async def test_a_full_batch_goes_at_once_and_whole_messages_are_never_split() -> None:
    model = Recorder()
    batcher = MicroBatcher(model, max_texts=4, max_wait_s=1.0)
    started = asyncio.get_running_loop().time()
    results = await asyncio.gather(*(batcher.embed([str(i), str(i)]) for i in range(3)))
    # 2 + 2 filled a batch, which went without waiting; the third message waited its deadline.
    assert model.calls == [4, 2]
    assert model.times[0] - started < 0.5
    assert model.times[1] - started >= 1.0
    assert [r[:, 0].tolist() for r in results] == [[0, 0], [1, 1], [2, 2]]


async def test_a_lone_caller_waits_no_longer_than_the_deadline() -> None:
    model = Recorder()
    batcher = MicroBatcher(model, max_texts=32, max_wait_s=0.02)
    started = asyncio.get_running_loop().time()
    await batcher.embed(["1"])
    assert asyncio.get_running_loop().time() - started < 1.0
    assert model.calls == [1]


async def test_a_failed_call_fails_every_caller_in_it() -> None:
    batcher = MicroBatcher(Recorder(fail=True), max_texts=32, max_wait_s=0.01)
    results = await asyncio.gather(
        batcher.embed(["1"]), batcher.embed(["2"]), return_exceptions=True
    )
    assert all(isinstance(r, RuntimeError) for r in results)
    with pytest.raises(RuntimeError):
        await batcher.embed(["3"])


@pytest.mark.parametrize("in_flight", [1, 2])
async def test_calls_in_flight_are_bounded_and_later_texts_join_the_next_call(
    in_flight: int,
) -> None:
    model = Recorder(seconds=0.2)
    batcher = MicroBatcher(model, max_texts=2, max_wait_s=0.01, in_flight=in_flight)
    parts = [[str(i)] for i in range(8)]
    results = await asyncio.gather(*(batcher.embed(p) for p in parts))
    assert model.most_running == in_flight
    assert model.calls == [2, 2, 2, 2]
    # With a second call queued, the next one starts before the first has finished.
    assert (model.times[1] - model.times[0] < 0.1) == (in_flight == 2)
    assert [r[:, 0].tolist() for r in results] == [[float(i)] for i in range(8)]


async def test_a_failed_call_frees_its_slot() -> None:
    model = Recorder(fail=True)
    batcher = MicroBatcher(model, max_texts=32, max_wait_s=0.01, in_flight=1)
    for text in ("1", "2", "3"):
        with pytest.raises(RuntimeError):
            await asyncio.wait_for(batcher.embed([text]), 5)
    assert model.calls == [1, 1, 1]
