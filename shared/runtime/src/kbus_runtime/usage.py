"""What a tenant holds of a shared stream, as the server counts it (per-subject message counts),
read at most once a second per stream and filter, and added to by this process in between.

A budget is checked against this count before more is stored (:mod:`kbus_runtime.budgets`).
Between two reads a process adds what it stored itself, so one process never passes a budget;
several replicas may together pass it by what each stored in that second.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

#: Seconds a count is used before it is read again.
COUNT_TTL_S = 1.0


@dataclass
class _Count:
    value: int
    at: float


@dataclass
class Usage:
    """Counts of messages per (stream, filter subject), read from the server."""

    js: Callable[[], JetStreamContext]
    ttl_s: float = COUNT_TTL_S
    clock: Callable[[], float] = time.monotonic
    _counts: dict[tuple[str, str], _Count] = field(default_factory=dict)

    async def messages(self, stream: str, subject: str) -> int:
        """Messages of ``stream`` whose subject matches ``subject``."""
        key = (stream, subject)
        now = self.clock()
        known = self._counts.get(key)
        if known is None or now - known.at > self.ttl_s:
            known = _Count(await self.read(stream, subject), now)
            self._counts[key] = known
            self._forget(now)
        return known.value

    async def read(self, stream: str, subject: str) -> int:
        """The server's count, now."""
        try:
            info = await self.js().stream_info(stream, subjects_filter=subject)
        except NotFoundError:
            return 0
        return sum(int(n) for n in (info.state.subjects or {}).values())

    def added(self, stream: str, subject: str, count: int = 1) -> None:
        """This process stored ``count`` more messages matching ``subject``."""
        known = self._counts.get((stream, subject))
        if known is not None:
            known.value += count

    def forget(self, stream: str, subject: str) -> None:
        """The count changed otherwise (a purge): read it again next time."""
        self._counts.pop((stream, subject), None)

    def _forget(self, now: float) -> None:
        if len(self._counts) > 10_000:
            for key in [k for k, c in self._counts.items() if now - c.at > self.ttl_s]:
                del self._counts[key]
