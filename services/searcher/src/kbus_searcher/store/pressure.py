"""Searches before bulk writes, and cheap searches before costly ones: what the store does
first while searches are being answered.

A search competes for the same cores as the index's writes (Weaviate's graph inserts, and the
models beside it), so while one tenant imports at full speed another's search would take many
times its idle time. A search holds :meth:`Pressure.searching` from its start to its reply;
the indexer's writes ask :meth:`Pressure.room_to_write` before each slice of objects: none
starts while a search is in flight (for at most ``most_wait_s``, so that constant searching
slows indexing but never stops it), and while searches came in the last ``recent_s`` a write
goes in slices of ``slice_objects``, so that a search arriving meanwhile waits for one slice at
most, not for a whole batch (docs/performance.md, "Search during an import").

The same goes between searches: a costly search's reads of the store (hundreds of candidates,
a context's thousands of chunks) start only while no cheap search of another tenant is in
flight here (for at most ``most_wait_s`` a read), so that one tenant's costly searches slow
another's ordinary ones by the read under way at most (:meth:`Pressure.room_to_read`).

A query searcher apart from its indexers (KBUS_SEARCHER_SERVE, KBUS_SEARCHER_INDEX) tells them
through the bus (``search.pressure``, at most every :data:`SIGNAL_EVERY_S` while it answers
searches): they then write in slices too (:meth:`Pressure.said`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

#: Seconds between two of a query searcher's signals that it answers searches.
SIGNAL_EVERY_S = 0.1
#: A search of more work than this (in ordinary searches: kbus_searcher.search.pricing) is
#: costly: its reads yield to the cheaper searches of other tenants.
COSTLY_WORK = 4.0


@dataclass(eq=False)
class Pressure:
    """Searches in flight, which the store's writes yield to."""

    #: The longest a write waits for searches to end.
    most_wait_s: float = 0.5
    #: Seconds after a search during which writes go in slices.
    recent_s: float = 2.0
    #: Objects a write holds while searches come.
    slice_objects: int = 32
    clock: Callable[[], float] = time.monotonic
    _in_flight: int = field(default=0, init=False)
    _last: float = field(default=float("-inf"), init=False)
    _quiet: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _said: float = field(default=float("-inf"), init=False)
    #: The cheap searches in flight, by tenant (what a costly one's reads wait for).
    _cheap: dict[str, int] = field(default_factory=dict, init=False)
    _cheap_done: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    def __post_init__(self) -> None:
        self._quiet.set()

    @contextlib.contextmanager
    def searching(self, tenant: str = "", work: float = 1.0) -> Iterator[None]:
        """Held while one search (of ``tenant``, costing ``work``) is answered."""
        self._in_flight += 1
        self._quiet.clear()
        cheap = work <= COSTLY_WORK
        if cheap:
            self._cheap[tenant] = self._cheap.get(tenant, 0) + 1
        try:
            yield
        finally:
            self._in_flight -= 1
            self.saw_search()
            if not self._in_flight:
                self._quiet.set()
            if cheap:
                self._cheap[tenant] -= 1
                if not self._cheap[tenant]:
                    del self._cheap[tenant]
                self._cheap_done.set()

    async def room_to_read(self, tenant: str, work: float) -> None:
        """Before a read of a search of ``tenant`` costing ``work``: a costly one waits while a
        cheap search of another tenant is in flight (at most ``most_wait_s``)."""
        if work <= COSTLY_WORK:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + self.most_wait_s
        while any(t != tenant for t in self._cheap) and loop.time() < until:
            self._cheap_done.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._cheap_done.wait(), until - loop.time())

    def saw_search(self) -> None:
        """A search was answered just now (here, or by a query searcher that said so)."""
        self._last = self.clock()

    def said(self) -> None:
        """A query searcher (elsewhere, or this one) said it answers searches."""
        self.saw_search()

    def to_say(self) -> bool:
        """Whether this searcher should say now that it answers searches (at most every
        :data:`SIGNAL_EVERY_S` while it does)."""
        now = self.clock()
        if self._in_flight and now - self._said >= SIGNAL_EVERY_S:
            self._said = now
            return True
        return False

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def busy(self) -> bool:
        """Whether searches come now: writes then go in slices."""
        return self._in_flight > 0 or self.clock() - self._last < self.recent_s

    async def room_to_write(self) -> None:
        """Wait while a search is in flight here, at most ``most_wait_s``."""
        if self._in_flight:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._quiet.wait(), self.most_wait_s)

    def slices(self, count: int) -> list[range]:
        """The slices a write of ``count`` objects goes in: one while no search comes."""
        size = self.slice_objects if self.busy else max(1, count)
        return [range(start, min(count, start + size)) for start in range(0, count, size)]
