"""Work that runs beside a block and ends with it (a keep-alive, a renewal's watch)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable


@contextlib.asynccontextmanager
async def alongside(work: Awaitable[None]) -> AsyncIterator[asyncio.Future[None]]:
    """``work`` runs while in the block and is cancelled when it is left."""
    task = asyncio.ensure_future(work)
    try:
        yield task
    finally:
        await cancelled(task)


async def cancelled(task: asyncio.Future[None]) -> None:
    """Cancel ``task`` and wait until it has ended."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
