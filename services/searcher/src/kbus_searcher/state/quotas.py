"""Two of a tenant's budgets the searcher holds it to: searches per second and chunks stored
(kbus_runtime.budgets declares them, with every other).

A tenant over its search rate gets ``quota_exceeded`` (retryable, with when to retry); a
document that would take its tenant over its stored chunks is dead-lettered with
``quota_exceeded`` (replay it once the limit is raised or chunks deleted). Other tenants are
not touched. The search rate is held per searcher replica (N replicas answer up to N times the
rate); the chunk count is read from the store and kept a few seconds between reads.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from kbus_contract.errors import ErrorCode, PermanentError, TransientError
from kbus_runtime.budgets import Budget, Budgets

#: Seconds a tenant's stored chunk count is used before it is read again.
COUNT_TTL_S = 5.0


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

    def limit(self, tenant: str) -> Budget | None:
        return self.budgets.of(tenant) if self.budgets is not None else None

    def take_search(self, tenant: str) -> None:
        """Count one search of ``tenant``; raise if it is over its rate (a bucket of one
        second's searches, refilled continuously)."""
        budget = self.limit(tenant)
        rate = budget.searches_per_second if budget is not None else 0.0
        if rate <= 0:
            return
        now = self.clock()
        bucket = self._buckets.setdefault(tenant, _Bucket(max(1.0, rate), now))
        bucket.tokens = min(max(1.0, rate), bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        if bucket.tokens < 1.0:
            wait = (1.0 - bucket.tokens) / rate
            raise TransientError(
                f"tenant {tenant!r} is over its budget (searches_per_second) of {rate:g} "
                "searches a second",
                code=ErrorCode.QUOTA_EXCEEDED,
                retry_after_s=wait,
            )
        bucket.tokens -= 1.0

    async def admit_chunks(self, tenant: str, adding: int) -> None:
        """Raise unless ``tenant`` may store ``adding`` more chunks; count them if it may."""
        budget = self.limit(tenant)
        cap = budget.chunks if budget is not None else 0
        if cap <= 0 or self.count_chunks is None:
            return
        stored = await self._stored(tenant)
        if stored + adding > cap:
            raise PermanentError(
                f"tenant {tenant!r} stores {stored} chunks; {adding} more would pass its budget "
                f"(chunks) of {cap}",
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
