"""How close an unrelated query comes to a library: its baseline similarity.

The best cosine an off-topic question reaches grows with the library: among twenty thousand
chunks something is always a little alike, among twenty nothing is. So the no_match decision
holds a query's best similarity against the libraries' own baseline: the median best cosine
of a fixed set of everyday probe questions (``data/probes.txt``) searched in the same
libraries. It is measured the first time libraries are searched, shared by the searches that
arrive meanwhile, and measured again after ``ttl_s`` (the libraries grow).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from importlib.resources import files

from kbus_runtime.tracing import tracer

from kbus_searcher.store import StoreView

#: Vectors of texts for queries (the embedder's): (model, vectors).
EmbedQueries = Callable[[list[str]], Awaitable[tuple[str, list[list[float]]]]]
#: Baselines kept at most, by default.
MAX_KEPT = 10_000
#: tenant, libraries, readers (None: every document), model
Key = tuple[str, tuple[str, ...], tuple[str, ...] | None, str]


def probes() -> list[str]:
    """The probe questions."""
    text = files("kbus_searcher").joinpath("data/probes.txt").read_text()
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


class Baselines:
    """Each set of libraries' baseline similarity, measured on first use and kept a while."""

    def __init__(self, embed: EmbedQueries, ttl_s: float = 600.0, max_kept: int = MAX_KEPT) -> None:
        self._embed = embed
        self.ttl_s = ttl_s
        #: Baselines kept at most: what is kept follows the tenants searching now, never the
        #: tenant count (the expired go first, then the least recently used).
        self.max_kept = max_kept
        self._texts = probes()
        self._vectors: dict[str, list[list[float]]] = {}
        self._known: dict[Key, tuple[float, asyncio.Future[float | None]]] = {}

    async def of(self, view: StoreView, libraries: Sequence[str], model: str) -> float | None:
        """The baseline of these libraries, as ``view`` reads them, for queries embedded by
        ``model`` (None: empty)."""
        scope = view.scope
        key = (scope.tenant, tuple(sorted(libraries)), scope.readers, model)
        known = self._known.get(key)
        now = time.monotonic()
        if known is None or now - known[0] > self.ttl_s:
            self._known.pop(key, None)
            self._make_room(now)
            known = (now, asyncio.ensure_future(self._measure(view, key)))
        else:
            del self._known[key]  # kept last: the least recently used go first
        self._known[key] = known
        try:
            return await asyncio.shield(known[1])
        except Exception:
            self._known.pop(key, None)  # measured again by the next search
            raise

    def _make_room(self, now: float) -> None:
        if len(self._known) < self.max_kept:
            return
        for key in [k for k, (at, _) in self._known.items() if now - at > self.ttl_s]:
            del self._known[key]
        while len(self._known) >= self.max_kept:
            del self._known[next(iter(self._known))]

    @property
    def kept(self) -> int:
        """How many baselines are kept now."""
        return len(self._known)

    async def _measure(self, view: StoreView, key: Key) -> float | None:
        _, libraries, _, model = key
        with tracer.start_as_current_span(
            "baseline", attributes={"kbus.probes": len(self._texts)}
        ) as span:
            baseline = await self._median_best(view, libraries, model)
            span.set_attribute("kbus.baseline", -1.0 if baseline is None else baseline)
            return baseline

    async def _median_best(
        self, view: StoreView, libraries: tuple[str, ...], model: str
    ) -> float | None:
        vectors = self._vectors.get(model)
        if vectors is None:
            embedded_by, vectors = await self._embed(self._texts)
            if embedded_by != model:
                return None  # the embedders switched models meanwhile: no baseline this time
            self._vectors[model] = vectors
        found = await asyncio.gather(*(view.best_cosine(libraries, v) for v in vectors))
        best = [b for b in found if b is not None]
        return statistics.median(best) if best else None
