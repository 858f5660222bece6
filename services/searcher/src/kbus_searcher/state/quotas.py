"""The tenant's budgets the searcher holds it to: the work of its searches a second and at
once, and its chunks stored (kbus_runtime.budgets declares them, with every other).

A search is charged its estimated work before it runs (:mod:`kbus_searcher.search.pricing`) and
its measured work once it ran: a tenant over its work a second, while another tenant searches
here too, gets ``quota_exceeded`` (retryable, with when to retry), and its costly searches take
that much more of its second. A tenant searching alone is not held to its rate (nobody waits
for it), but is charged as ever, so that it is held to it the moment another tenant comes. A
document that would take its tenant over its stored chunks is dead-lettered with
``quota_exceeded`` (replay it once the limit is raised or chunks deleted). Other tenants are
not touched. The rates are held per searcher replica (N replicas answer up to N times them);
the chunk count is read from the store and kept a few seconds between reads.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kbus_contract.errors import ErrorCode, PermanentError, TransientError
from kbus_runtime.budgets import Budget, Budgets, Resource

#: Seconds a tenant's stored chunk count is used before it is read again.
COUNT_TTL_S = 5.0
#: Seconds after another tenant's search during which a tenant is held to its search rate.
CONTENDED_S = 10.0
#: Seconds of its rate a tenant may spend at once (a burst of searches an agent asks together
#: is answered; what it keeps asking is held to the rate).
BURST_S = 4.0


def _capacity(rate: float) -> float:
    return max(1.0, rate * BURST_S)


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class Quotas:
    """The budgets of every tenant, and what each has used."""

    budgets: Budgets | None = None
    count_chunks: Callable[[str], Awaitable[int]] | None = None
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _counts: dict[str, tuple[float, int]] = field(default_factory=dict)
    #: When each tenant last asked for a search here, oldest first (the last
    #: :data:`CONTENDED_S` seconds' only).
    _asking: OrderedDict[str, float] = field(default_factory=OrderedDict)

    def limit(self, tenant: str) -> Budget | None:
        return self.budgets.of(tenant) if self.budgets is not None else None

    def in_flight(self, tenant: str) -> float | None:
        """The work of ``tenant``'s searches answered at once, at most (None: no bound)."""
        budget = self.limit(tenant)
        return budget.figure(Resource.SEARCH_COST_IN_FLIGHT) or None if budget else None

    def take_search(self, tenant: str, work: float = 1.0) -> None:
        """Charge one search of ``work`` to ``tenant``; raise if it is over its rate. The
        bucket holds :data:`BURST_S` seconds' work and refills continuously; a search costing
        more than the bucket holds runs once it is full, leaving it in debt that much."""
        contended = self._contended(tenant)
        bucket, rate = self._refilled(tenant)
        if bucket is None:
            return
        if contended:
            self._refuse(tenant, bucket, rate, min(work, _capacity(rate)), work)
        bucket.tokens -= work

    def check_search(self, tenant: str) -> None:
        """Raise, before a search is even read, if ``tenant`` has not a search's worth left
        (a tenant asking again and again past its budget costs next to nothing)."""
        contended = self._contended(tenant)
        bucket, rate = self._refilled(tenant)
        if bucket is not None and contended:
            self._refuse(tenant, bucket, rate, 1.0, None)

    def _contended(self, tenant: str) -> bool:
        """Whether another tenant asked for a search here in the last :data:`CONTENDED_S`
        seconds (``tenant`` is noted as asking now). A tenant alone may go past its rate: its
        searches are charged all the same, so it is held to the rate as soon as another
        comes."""
        now = self.clock()
        self._asking[tenant] = now
        self._asking.move_to_end(tenant)
        while self._asking and next(iter(self._asking.values())) < now - CONTENDED_S:
            self._asking.popitem(last=False)
        return len(self._asking) > 1

    def _refilled(self, tenant: str) -> tuple[_Bucket | None, float]:
        rate = self._rate(tenant)
        if rate <= 0:
            return None, rate
        now = self.clock()
        capacity = _capacity(rate)
        bucket = self._buckets.setdefault(tenant, _Bucket(capacity, now))
        bucket.tokens = min(capacity, bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        return bucket, rate

    def _refuse(
        self, tenant: str, bucket: _Bucket, rate: float, needed: float, work: float | None
    ) -> None:
        if bucket.tokens < needed:
            wait = (needed - bucket.tokens) / rate
            left = max(0.0, bucket.tokens)
            this = f"this search's is {work:g}" if work is not None else "a search's is 1 at least"
            raise TransientError(
                f"tenant {tenant!r} is over its budget ({Resource.SEARCH_COST_PER_SECOND.value}) "
                f"of {rate:g} work a second: {this} and {left:.3g} is left now; ask again in "
                f"{wait:.2g}s",
                code=ErrorCode.QUOTA_EXCEEDED,
                retry_after_s=wait,
            )

    def settle_search(self, tenant: str, more: float) -> None:
        """A search that ran cost ``more`` than its charge (less than nothing: less)."""
        bucket = self._buckets.get(tenant)
        if bucket is not None and self._rate(tenant) > 0:
            bucket.tokens = min(_capacity(self._rate(tenant)), bucket.tokens - more)

    def forget_idle(self) -> None:
        """Drop the buckets that are full again and the chunk counts due to be read again: a
        tenant idle for a few seconds costs nothing here."""
        now = self.clock()
        for tenant, bucket in list(self._buckets.items()):
            rate = self._rate(tenant)
            if rate <= 0 or bucket.tokens + (now - bucket.at) * rate >= _capacity(rate):
                del self._buckets[tenant]
        for tenant, (read, _) in list(self._counts.items()):
            if now - read > COUNT_TTL_S:
                del self._counts[tenant]
        while self._asking and next(iter(self._asking.values())) < now - CONTENDED_S:
            self._asking.popitem(last=False)

    def held(self) -> int:
        """The tenants this process holds anything of."""
        return len(self._buckets.keys() | self._counts.keys() | self._asking.keys())

    def _rate(self, tenant: str) -> float:
        budget = self.limit(tenant)
        return budget.figure(Resource.SEARCH_COST_PER_SECOND) if budget is not None else 0.0

    async def admit_chunks(self, tenant: str, adding: int) -> None:
        """Raise unless ``tenant`` may store ``adding`` more chunks; count them if it may."""
        budget = self.limit(tenant)
        cap = budget.count(Resource.CHUNKS) if budget is not None else 0
        if cap <= 0 or self.count_chunks is None:
            return
        stored = await self._stored(tenant)
        if stored + adding > cap:
            raise PermanentError(
                f"tenant {tenant!r} stores {stored} chunks; {adding} more would pass its budget "
                f"({Resource.CHUNKS.value}) of {cap}",
                code=ErrorCode.QUOTA_EXCEEDED,
            )
        self._counts[tenant] = (self._counts[tenant][0], stored + adding)

    async def _stored(self, tenant: str) -> int:
        read, count = self._counts.get(tenant, (float("-inf"), 0))
        if self.clock() - read > COUNT_TTL_S:
            assert self.count_chunks is not None
            count = await self.count_chunks(tenant)
            self._counts[tenant] = (self.clock(), count)
        return count
