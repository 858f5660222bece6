"""Deadlines: how long the caller of a request still waits, handed on from stage to stage.

A request carries a budget in milliseconds rather than a time of day, so no two machines' clocks
need agree: the budget counts from when the answering service received the request, and what
is left when it asks another stage goes with that request.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from kbus_contract.errors import ErrorCode, TransientError


@dataclass(frozen=True)
class Deadline:
    """The moment (``time.monotonic()``) after which nobody waits for the answer."""

    at: float
    budget_ms: int

    @classmethod
    def after(cls, budget_ms: int, start: float) -> Deadline:
        """The deadline ``budget_ms`` after ``start`` (a ``time.monotonic()`` reading)."""
        return cls(start + budget_ms / 1000.0, budget_ms)

    def left_s(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.at - time.monotonic())

    def left_ms(self) -> int:
        """Whole milliseconds left, to hand on as the next request's budget."""
        return math.floor(self.left_s() * 1000.0)

    def expired(self) -> bool:
        return self.at <= time.monotonic()

    def cap(self, timeout_s: float, reserve_s: float = 0.0) -> float:
        """A stage's own timeout, shortened to what is left but ``reserve_s``."""
        return max(0.0, min(timeout_s, self.left_s() - reserve_s))

    def check(self, doing: str) -> None:
        """Raise ``deadline_exceeded`` if the caller has stopped waiting."""
        if self.expired():
            raise exceeded(self, doing)

    @contextlib.asynccontextmanager
    async def bound(self, doing: str, reserve_s: float = 0.0) -> AsyncIterator[None]:
        """Cancel the work inside when ``reserve_s`` before the deadline is reached."""
        try:
            async with asyncio.timeout_at(_loop_time(self.at - reserve_s)):
                yield
        except TimeoutError as exc:
            raise exceeded(self, doing) from exc


#: Seconds after which work stopped for want of time is worth asking again (what kept it is
#: most likely other work of the moment).
BUSY_RETRY_S = 1.0


def exceeded(deadline: Deadline, doing: str) -> TransientError:
    """The error for work stopped because its caller's budget was spent: with when to ask
    again (with a larger budget, or once the load of the moment has passed)."""
    return TransientError(
        f"the budget of {deadline.budget_ms} ms was spent {doing}: ask again in "
        f"{BUSY_RETRY_S:g}s, or with a larger budget",
        code=ErrorCode.DEADLINE_EXCEEDED,
        retry_after_s=BUSY_RETRY_S,
    )


def _loop_time(monotonic_at: float) -> float:
    # asyncio's clock is time.monotonic() on every platform kbus runs on; converted anyway.
    loop = asyncio.get_running_loop()
    return loop.time() + (monotonic_at - time.monotonic())
