"""How a stream message is tried again: the pause before its next delivery, the wait in place on
its last one while a dependency is out, and what the server says of its deliveries."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from kbus_contract.alongside import alongside
from kbus_contract.errors import TransientError

BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 60.0
#: The pause before a message handed back by a stopping replica is delivered again.
HAND_BACK_S = 1.0
#: Seconds a message's last delivery waits in place for a dependency that is out.
OUTAGE_PATIENCE_S = 1800.0


class Message(Protocol):
    """What a stage needs of a stream message (FastStream's ``NatsMessage``)."""

    body: bytes

    @property
    def raw_message(self) -> Any: ...

    async def ack(self) -> None: ...

    async def nack(self, delay: float | None = None) -> None: ...

    async def reject(self) -> None: ...

    async def in_progress(self) -> None: ...


def backoff_s(deliveries: int) -> float:
    """Delay before the next attempt, growing with each delivery."""
    return float(min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** max(0, deliveries - 1)))


async def through_outages(
    work: Callable[[], Awaitable[None]],
    *,
    patience_s: float,
    stopping: asyncio.Event,
    waiting: Callable[[TransientError, float], bool],
) -> None:
    """``work``, tried again in place (1, 2, 4 ... 60 s apart) while it fails because a
    dependency is out, up to ``patience_s`` or until the replica stops; ``waiting`` is told of
    each pause and may refuse it (False: the error is raised). An outage is not the message's
    fault: dead-lettering every document in flight through one would leave them to whoever has
    to replay them."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + patience_s
    attempt = 1
    while True:
        try:
            await work()
            return
        except TransientError as exc:
            pause = backoff_s(attempt)
            if not exc.outage or stopping.is_set() or loop.time() + pause > give_up:
                raise
            if not waiting(exc, pause):
                raise
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), pause)
        attempt += 1


@contextlib.asynccontextmanager
async def kept_alive(message: Message, every_s: float) -> AsyncIterator[None]:
    """Tell the server every ``every_s`` that the message is still being worked on, so it is
    not delivered again meanwhile."""

    async def beat() -> None:
        while True:
            await asyncio.sleep(every_s)
            with contextlib.suppress(Exception):
                await message.in_progress()

    async with alongside(beat()):
        yield


def deliveries(message: Message) -> int:
    """How many times the server has delivered this message (1: the first time)."""
    try:
        return int(message.raw_message.metadata.num_delivered)
    except Exception:
        return 1


def stream_sequence(message: Message) -> int | None:
    """The message's sequence in its stream: the order in which it was published."""
    try:
        return int(message.raw_message.metadata.sequence.stream)
    except Exception:
        return None
