"""A library's baseline similarity: measured once, shared, measured again when it is old."""

from __future__ import annotations

import asyncio

import pytest
from kbus_searcher.search.baseline import Baselines, probes


class Counts:
    def __init__(self, model: str = "m") -> None:
        self.embeds = 0
        self.searches = 0
        self.model = model

    async def embed(self, texts: list[str]) -> tuple[str, list[list[float]]]:
        self.embeds += 1
        return self.model, [[float(i)] for i in range(len(texts))]

    async def best(self, tenant: str, libraries: tuple[str, ...], vector: list[float]) -> float:
        self.searches += 1
        await asyncio.sleep(0.01)
        return vector[0] / 100  # probe i reaches i/100


async def test_the_baseline_is_the_median_best_similarity_of_the_probes() -> None:
    counts = Counts()
    baselines = Baselines(counts.embed, counts.best)
    n = len(probes())
    assert n >= 20
    value = await baselines.of("t", ["lib"], "m")
    assert value == pytest.approx(((n - 1) / 2) / 100)
    assert (counts.embeds, counts.searches) == (1, n)


async def test_searches_arriving_together_share_one_measurement_and_it_is_kept() -> None:
    counts = Counts()
    baselines = Baselines(counts.embed, counts.best)
    await asyncio.gather(*(baselines.of("t", ["b", "a"], "m") for _ in range(5)))
    await baselines.of("t", ["a", "b"], "m")  # the same libraries in another order
    assert counts.searches == len(probes())
    await baselines.of("t", ["c"], "m")  # other libraries: measured, the probes embedded once
    assert (counts.embeds, counts.searches) == (1, 2 * len(probes()))


async def test_an_old_measurement_is_taken_again() -> None:
    counts = Counts()
    baselines = Baselines(counts.embed, counts.best, ttl_s=0.0)
    await baselines.of("t", ["lib"], "m")
    await asyncio.sleep(0.01)
    await baselines.of("t", ["lib"], "m")
    assert counts.searches == 2 * len(probes())


async def test_no_baseline_when_the_embedders_run_another_model() -> None:
    baselines = Baselines(Counts(model="other").embed, Counts().best)
    assert await baselines.of("t", ["lib"], "m") is None
