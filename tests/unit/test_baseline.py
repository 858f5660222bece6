"""A library's baseline similarity: measured once, shared, measured again when it is old."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest
from kbus_searcher.search.baseline import Baselines, probes
from kbus_searcher.store import Collections, Scope, StoreView


class Counts(StoreView):
    """The store as a caller's view reads it, standing in: probe i reaches i/100."""

    def __init__(self, model: str = "m", readers: tuple[str, ...] = ("*",)) -> None:
        super().__init__(cast(Collections, None), Scope.of_caller("t", None, readers))
        self.embeds = 0
        self.searches = 0
        self.model = model

    async def embed(self, texts: list[str]) -> tuple[str, list[list[float]]]:
        self.embeds += 1
        return self.model, [[float(i)] for i in range(len(texts))]

    async def best_cosine(self, libraries: tuple[str, ...], vector: list[float]) -> float:
        self.searches += 1
        await asyncio.sleep(0.01)
        return vector[0] / 100


async def test_the_baseline_is_the_median_best_similarity_of_the_probes() -> None:
    counts = Counts()
    baselines = Baselines(counts.embed)
    n = len(probes())
    assert n >= 20
    value = await baselines.of(counts, ["lib"], "m")
    assert value == pytest.approx(((n - 1) / 2) / 100)
    assert (counts.embeds, counts.searches) == (1, n)


async def test_searches_arriving_together_share_one_measurement_and_it_is_kept() -> None:
    counts = Counts()
    baselines = Baselines(counts.embed)
    await asyncio.gather(*(baselines.of(counts, ["b", "a"], "m") for _ in range(5)))
    await baselines.of(counts, ["a", "b"], "m")  # the same libraries in another order
    assert counts.searches == len(probes())
    await baselines.of(counts, ["c"], "m")  # other libraries: measured, the probes embedded once
    assert (counts.embeds, counts.searches) == (1, 2 * len(probes()))


async def test_an_old_measurement_is_taken_again() -> None:
    counts = Counts()
    baselines = Baselines(counts.embed, ttl_s=0.0)
    await baselines.of(counts, ["lib"], "m")
    await asyncio.sleep(0.01)
    await baselines.of(counts, ["lib"], "m")
    assert counts.searches == 2 * len(probes())


async def test_no_baseline_when_the_embedders_run_another_model() -> None:
    baselines = Baselines(Counts(model="other").embed)
    assert await baselines.of(Counts(), ["lib"], "m") is None


async def test_what_is_kept_follows_the_tenants_searching_not_the_tenant_count() -> None:
    """Many tenants' searches keep at most ``max_kept`` baselines, and a baseline in use is
    kept over one that is not (issue 57: nothing grows with the tenant count)."""
    baselines = Baselines(Counts().embed, max_kept=50)
    busy = Counts()
    for n in range(500):
        await baselines.of(Counts(), [f"lib{n}"], "m")  # a tenant's library searched once
        assert baselines.kept <= 50
        if n % 10 == 0:
            await baselines.of(busy, ["busy"], "m")
    assert busy.searches == len(probes())  # measured once, kept throughout
