"""Per-tenant limits an operator sets: searches per second and chunks stored.

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
from pydantic import BaseModel, ConfigDict, Field

#: Seconds a tenant's stored chunk count is used before it is read again.
COUNT_TTL_S = 5.0


class TenantLimit(BaseModel):
    """One tenant's limits (0: none)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    searches_per_second: float = Field(default=0.0, ge=0.0)
    chunks: int = Field(default=0, ge=0)


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class Quotas:
    """The limits of every tenant, and what each has used."""

    limits: dict[str, TenantLimit]
    default: TenantLimit = field(default_factory=TenantLimit)
    count_chunks: Callable[[str], Awaitable[int]] | None = None
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _counts: dict[str, tuple[float, int]] = field(default_factory=dict)

    def limit(self, tenant: str) -> TenantLimit:
        return self.limits.get(tenant, self.default)

    def take_search(self, tenant: str) -> None:
        """Count one search of ``tenant``; raise if it is over its rate (a bucket of one
        second's searches, refilled continuously)."""
        rate = self.limit(tenant).searches_per_second
        if rate <= 0:
            return
        now = self.clock()
        bucket = self._buckets.setdefault(tenant, _Bucket(max(1.0, rate), now))
        bucket.tokens = min(max(1.0, rate), bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        if bucket.tokens < 1.0:
            wait = (1.0 - bucket.tokens) / rate
            raise TransientError(
                f"tenant {tenant!r} is over its {rate:g} searches per second",
                code=ErrorCode.QUOTA_EXCEEDED,
                retry_after_s=wait,
            )
        bucket.tokens -= 1.0

    async def admit_chunks(self, tenant: str, adding: int) -> None:
        """Raise unless ``tenant`` may store ``adding`` more chunks; count them if it may."""
        cap = self.limit(tenant).chunks
        if cap <= 0 or self.count_chunks is None:
            return
        stored = await self._stored(tenant)
        if stored + adding > cap:
            raise PermanentError(
                f"tenant {tenant!r} stores {stored} chunks; {adding} more would pass its limit "
                f"of {cap}",
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
