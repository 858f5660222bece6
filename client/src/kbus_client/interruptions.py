"""What ends a request before its reply or its timeout: the bus refusing it, or the connection
it was sent on being lost.

The server answers a publish past a credential's rights with a permissions violation (to the
connection's error callback): the request would otherwise wait out its whole timeout and be
reported as one. A request sent before the connection was lost (its server killed, say) has no
reply coming: the client reconnects to another server, but the try would wait out its time
before it is asked again. Each request waits on these beside its reply, and the first to come
ends it: a refusal is said as one at once, and a lost request is asked again at once.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable
from typing import Any, TypeVar

from kbus_contract.errors import ErrorCode, KbusError, PermanentError, TransientError

T = TypeVar("T")
_VIOLATION = re.compile(r'permissions violation for publish to "([^"]+)"', re.IGNORECASE)


class Interruptions:
    """The requests in flight by subject, each ended by a refusal of its subject, and all of
    them by a reconnection."""

    def __init__(self) -> None:
        self._waiting: dict[str, dict[asyncio.Future[KbusError], str]] = {}

    def heard(self, exc: Exception) -> None:
        """An error the connection reported: a publish refused ends the requests on its
        subject."""
        found = _VIOLATION.search(str(exc))
        if found is None:
            return
        subject = found.group(1)
        self._end(
            self._waiting.get(subject, {}),
            PermanentError(
                f"this credential may not ask on {subject}: the bus refused it (its rights do "
                "not reach this tenant, library or request; ask the operator for one that does)",
                code=ErrorCode.PERMISSION_DENIED,
            ),
        )

    def reconnected(self) -> None:
        """The connection came back (to the same server or another): every request sent
        before is lost with the old one and is asked again."""
        for waiting in list(self._waiting.values()):
            for waiter, stage in list(waiting.items()):
                if not stage:
                    continue  # a publish: re-sent under its id where it is not acknowledged
                lost = TransientError(
                    "the connection to NATS was lost with this request; asked again",
                    code=ErrorCode.unanswered(stage, timed_out=False),
                    stage=stage,
                )
                self._end({waiter: stage}, lost)

    @staticmethod
    def _end(waiting: dict[asyncio.Future[KbusError], str], error: KbusError) -> None:
        for waiter in list(waiting):
            if not waiter.done():
                waiter.set_result(error)

    async def race(self, subject: str, stage: str, asked: Awaitable[T]) -> T:
        """``asked``'s answer, unless the bus refuses ``subject`` or the connection is lost
        first (``stage`` empty: a refusal only, for a publish its sender re-sends itself
        under its id when no acknowledgement comes).

        Raises:
            PermanentError: ``permission_denied``, naming the subject.
            TransientError: ``<stage>_unavailable``: the request was lost with its connection.
        """
        ended: asyncio.Future[KbusError] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(subject, {})[ended] = stage
        task = asyncio.ensure_future(asked)
        try:
            either: list[asyncio.Future[Any]] = [task, ended]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                return task.result()
            raise ended.result()
        finally:
            waiting = self._waiting[subject]
            waiting.pop(ended, None)
            if not waiting:
                del self._waiting[subject]
            if not task.done():
                task.cancel()
