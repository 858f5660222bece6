"""A request the bus refused: the server answers a publish past a credential's rights with a
permissions violation (to the connection's error callback), and the request would otherwise
wait out its whole timeout and be reported as one. Each request waits on its subject's
refusal beside its reply, and the first to come ends it: a refused permission is said as one
at once."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable
from typing import Any, TypeVar

from kbus_contract.errors import ErrorCode, PermanentError

T = TypeVar("T")
_VIOLATION = re.compile(r'permissions violation for publish to "([^"]+)"', re.IGNORECASE)


class Refusals:
    """The requests in flight by subject, each ended by a refusal of its subject."""

    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Future[str]]] = {}

    def heard(self, exc: Exception) -> None:
        """An error the connection reported: a publish refused ends the requests on its
        subject."""
        found = _VIOLATION.search(str(exc))
        if found is None:
            return
        for waiter in self._waiting.get(found.group(1), set()):
            if not waiter.done():
                waiter.set_result(str(exc))

    async def race(self, subject: str, asked: Awaitable[T]) -> T:
        """``asked``'s answer, unless the bus refuses ``subject`` first.

        Raises:
            PermanentError: ``permission_denied``, naming the subject.
        """
        refused: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(subject, set()).add(refused)
        task = asyncio.ensure_future(asked)
        try:
            either: list[asyncio.Future[Any]] = [task, refused]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                return task.result()
            task.cancel()
            raise PermanentError(
                f"this credential may not ask on {subject}: the bus refused it (its rights do "
                "not reach this tenant, library or request; ask the operator for one that does)",
                code=ErrorCode.PERMISSION_DENIED,
            )
        finally:
            waiting = self._waiting[subject]
            waiting.discard(refused)
            if not waiting:
                del self._waiting[subject]
            if not task.done():
                task.cancel()
