"""Group commit: what concurrent handlers hand in while a batch runs goes in the next batch.

The indexer's work per document was mostly round trips (a query, a write and a delete in
Weaviate, then the bus), each costing the event loop far more than the data it carried. Handlers
still settle their own messages; they wait here for their document's part of a shared batch.
A batch holds what arrived within a short linger after its first item, or while the previous
batch ran, up to ``max_items``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")
#: Runs one batch; returns, per item and in order, ``None`` or the error that item ends with.
RunBatch = Callable[[list[T]], Awaitable[list[Exception | None]]]


class GroupCommit(Generic[T]):
    """Runs batches of items one at a time; each caller gets its own item's outcome."""

    def __init__(self, run: RunBatch[T], max_items: int, linger_s: float = 0.0) -> None:
        self._run = run
        self.max_items = max_items
        self.linger_s = linger_s
        self._pending: list[tuple[T, asyncio.Future[None]]] = []
        self._full = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> None:
        """Wait until the batch holding ``item`` has run; raise the item's error if any."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if len(self._pending) >= self.max_items:
            self._full.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())
        await future

    async def _drain(self) -> None:
        while self._pending:
            # Handlers that received their message in the same turn of the loop (or within the
            # linger) join this batch.
            self._full.clear()
            if len(self._pending) < self.max_items:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self.linger_s)
            batch = self._pending[: self.max_items]
            del self._pending[: self.max_items]
            try:
                outcomes = await self._run([item for item, _ in batch])
            except Exception as exc:  # a failure of the whole batch is every item's
                outcomes = [exc] * len(batch)
            except asyncio.CancelledError:
                for _, future in batch + self._pending:
                    future.cancel()
                raise
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                if future.done():
                    continue  # its handler was cancelled
                if outcome is None:
                    future.set_result(None)
                else:
                    future.set_exception(outcome)
