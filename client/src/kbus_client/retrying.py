"""Asking again: a request that met a retryable error is sent again while its caller's wait allows.

No responders (a stage between replicas or restarting), a retryable error reply
(``store_error``, ``searcher_unavailable``) or a try that ran out of time are all
:class:`~kbus_contract.errors.TransientError`; an answer that is not retryable is returned or
raised at once. Pauses are "full jitter" (uniform up to an exponential ceiling), so clients that
failed together do not come back together, and no try starts with less than ``least_try_s`` of
the wait left: a request is never sent past its caller's budget.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from kbus_contract.errors import ErrorCode, KbusError, TransientError
from kbus_contract.hedging import HEDGE, Hedge

T = TypeVar("T")
log = logging.getLogger("kbus.client")


@dataclass(frozen=True)
class Retry:
    """How a client asks again: pauses of up to ``first_pause_s`` doubling to
    ``longest_pause_s``, and no try with less than ``least_try_s`` of the wait left."""

    first_pause_s: float = 0.05
    longest_pause_s: float = 1.0
    least_try_s: float = 0.25
    #: Of what is left of the wait, the share (at most ``hold_back_s``) a try is not given, so
    #: that a request nothing answers (a replica killed while it held it) leaves time for one
    #: more try.
    hold_back_share: float = 0.25
    hold_back_s: float = 2.5
    #: Retryable codes asked again only by the caller: a tenant over its search rate slows
    #: down instead of adding tries to the load that stopped it.
    left_to_caller: frozenset[str] = frozenset({ErrorCode.QUOTA_EXCEEDED})
    #: A repeatable read late past what its kind usually takes is sent again before its try
    #: ends (:mod:`kbus_contract.hedging`); None: never.
    hedge: Hedge | None = HEDGE

    def pause_s(self, tries: int, error: KbusError, rng: random.Random) -> float | None:
        """The pause before try ``tries + 1`` after ``error``, or None: do not ask again."""
        if not error.retryable or error.code in self.left_to_caller:
            return None
        ceiling = min(self.longest_pause_s, self.first_pause_s * 2 ** (tries - 1))
        after = error.retry_after_s if isinstance(error, TransientError) else None
        return max(rng.uniform(0, ceiling), after or 0.0)

    def try_s(self, left_s: float) -> float:
        """The time a try is given when ``left_s`` of the wait is left."""
        held = min(self.hold_back_s, left_s * self.hold_back_share)
        # Never under the shortest try (unless less is left), and shorter as less is left.
        return min(left_s, max(self.least_try_s, left_s - held))


#: What a client does unless told otherwise.
ASK_AGAIN = Retry()


async def with_retries(
    attempt: Callable[[float], Awaitable[T]],
    wait_s: float,
    retry: Retry | None,
    rng: random.Random | None = None,
) -> tuple[T, int]:
    """Run ``attempt(seconds)`` until it answers, asking again after retryable errors while
    ``wait_s`` allows; the answer and how many tries it took. Each try is given what is left
    of the wait less a share held back for another (:meth:`Retry.try_s`; all of it without
    retries). The error that ends it carries ``tries`` too."""
    deadline = time.monotonic() + wait_s
    rng = rng or random.Random()
    tries = 0
    while True:
        tries += 1
        try:
            left = deadline - time.monotonic()
            return await attempt(retry.try_s(left) if retry else left), tries
        except KbusError as exc:
            exc.tries = tries
            pause = retry.pause_s(tries, exc, rng) if retry else None
            if retry is None or pause is None:
                raise
            if deadline - time.monotonic() - pause < retry.least_try_s:
                raise
            log.info("asking again in %.2f s after %s (try %d)", pause, exc.code, tries)
            await asyncio.sleep(pause)
            if deadline - time.monotonic() < retry.least_try_s:
                raise  # the pause ran over (a busy event loop)
