"""A second try before the first answers: a client's reads, and a service's requests to
another stage (the searcher's embedding of a query).

A try can be lost where no error reaches the asker: the replica that took it died or hangs
(its own connection went with a NATS server that was killed; its process stopped), and the try
would wait out its time, most of the caller's budget, before it is asked again. So where a
request has not answered by the time nearly all of its kind do (the ``quantile`` of the
answers this client saw), the same request goes out again, to whichever replica takes it, and
the first answer wins; the others are dropped.

Only a repeatable read is hedged (the catalog's ``repeatable``: a second copy is answered as
the first and changes nothing). Hedges are bounded so that a slow installation is not sent
twice its load: at most ``share`` of the requests over time (a bucket of ``burst``), at most
``most`` per try, none before ``warm`` answers of the kind were seen, and none with less than
``least_try_s`` of the try left.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Hedge:
    """When a client sends a request again before its first try answers."""

    #: Hedges at most this share of the requests, over time ...
    share: float = 0.1
    #: ... and at most this many in a burst.
    burst: float = 20.0
    #: A try unanswered after this quantile of its kind's answer times is asked again ...
    quantile: float = 0.95
    #: ... but never sooner than this.
    least_delay_s: float = 0.05
    #: The answer times remembered per kind of request, and how many before any hedge.
    samples: int = 256
    warm: int = 20
    #: Hedges per try, each after twice the wait of the one before (a replica that holds
    #: tries for a while may take a hedge too: a later one reaches another).
    most: int = 8
    #: No hedge with less than this of the try left.
    least_try_s: float = 0.25


#: What a client does unless told otherwise.
HEDGE = Hedge()


class Hedger:
    """A client's answer times by kind of request and its bucket of hedges."""

    def __init__(self, policy: Hedge) -> None:
        self.policy = policy
        self._answers: dict[str, deque[float]] = {}
        self._tokens = policy.burst
        #: Hedges sent, by kind of request (what a caller or a test may read).
        self.sent: dict[str, int] = {}

    def delay_s(self, kind: str) -> float | None:
        """How long a try of ``kind`` waits before a hedge (None: no hedge yet)."""
        seen = self._answers.get(kind)
        if seen is None or len(seen) < self.policy.warm:
            return None
        ordered = sorted(seen)
        at = min(len(ordered) - 1, int(self.policy.quantile * len(ordered)))
        return max(self.policy.least_delay_s, ordered[at])

    def _answered(self, kind: str, seconds: float) -> None:
        seen = self._answers.setdefault(kind, deque(maxlen=self.policy.samples))
        seen.append(seconds)

    def _take(self, kind: str) -> bool:
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        self.sent[kind] = self.sent.get(kind, 0) + 1
        return True

    async def first(self, kind: str, ask: Callable[[float], Awaitable[T]], left_s: float) -> T:
        """The first answer of ``ask(seconds)``, sent once and again where it is late (each
        copy given what is left of ``left_s``); the first try's error where none answers."""
        policy = self.policy
        self._tokens = min(policy.burst, self._tokens + policy.share)
        deadline = time.monotonic() + left_s
        first = asyncio.ensure_future(ask(left_s))
        started: dict[asyncio.Future[T], float] = {first: time.monotonic()}
        pending: set[asyncio.Future[T]] = {first}
        failed: dict[asyncio.Future[T], BaseException] = {}
        delay, hedges = self.delay_s(kind), 0
        try:
            while pending:
                done, _ = await asyncio.wait(
                    pending, timeout=delay, return_when=asyncio.FIRST_COMPLETED
                )
                for task in done:
                    pending.discard(task)
                    error = task.exception()
                    if error is None:
                        self._answered(kind, time.monotonic() - started[task])
                        return task.result()
                    failed[task] = error
                if done or delay is None:
                    continue
                left = deadline - time.monotonic()
                if hedges < policy.most and left > policy.least_try_s and self._take(kind):
                    again = asyncio.ensure_future(ask(left))
                    started[again] = time.monotonic()
                    pending.add(again)
                    hedges += 1
                    delay *= 2
                else:
                    delay = None
            raise failed.get(first) or next(iter(failed.values()))
        finally:
            _cancel(pending)


def _cancel(tasks: set[asyncio.Future[Any]]) -> None:
    for task in tasks:
        if not task.done():
            task.cancel()
