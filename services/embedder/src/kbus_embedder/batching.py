"""Micro-batching: chunks of many messages embedded in one model call.

A document has a handful of chunks; one model call per document leaves the model working on
small, unevenly padded batches. Handlers run concurrently and hand their texts to a
:class:`MicroBatcher`, which runs one call for everything that arrived within a short deadline
(or as soon as a full batch is waiting), then gives each caller its own rows back. Each message
is still acked on its own, after its own vectors are published.

Up to ``in_flight`` calls run at once, so the next call's texts are already queued at the model
when the current call ends: with one call at a time the model sat idle while the finished
messages were published and acked and the next ones fetched and gathered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

EmbedFn = Callable[[list[str]], Awaitable[np.ndarray]]
CallObserver = Callable[[int], None]
Waiting = list[tuple[list[str], "asyncio.Future[np.ndarray]"]]


class MicroBatcher:
    """Gathers texts from concurrent callers into batches of up to ``max_texts``."""

    def __init__(
        self,
        embed: EmbedFn,
        max_texts: int,
        max_wait_s: float,
        in_flight: int = 1,
        on_call: CallObserver | None = None,
    ) -> None:
        self._embed = embed
        self._on_call = on_call
        self.max_texts = max_texts
        self.max_wait_s = max_wait_s
        self._pending: Waiting = []
        self._count = 0
        self._full = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._slots = asyncio.Semaphore(in_flight)
        self._calls: set[asyncio.Task[None]] = set()

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of ``texts``, computed together with other callers' texts."""
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._pending.append((list(texts), future))
        self._count += len(texts)
        if self._count >= self.max_texts:
            self._full.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            # A slot first, then the deadline: texts that arrive while every slot is busy join
            # the next call instead of waiting in a call of their own.
            await self._slots.acquire()
            if self._count < self.max_texts:
                self._full.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self.max_wait_s)
            call = asyncio.create_task(self._call(self._take()))
            self._calls.add(call)
            call.add_done_callback(self._calls.discard)

    async def _call(self, batch: Waiting) -> None:
        texts = [t for items, _ in batch for t in items]
        if self._on_call is not None:
            self._on_call(len(texts))
        try:
            vectors = await self._embed(texts)
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        finally:
            self._slots.release()
        row = 0
        for items, future in batch:
            if not future.done():
                future.set_result(vectors[row : row + len(items)])
            row += len(items)

    def _take(self) -> Waiting:
        # Whole messages only, up to max_texts (a message larger than that goes alone).
        taken: Waiting = []
        count = 0
        while self._pending and (not taken or count + len(self._pending[0][0]) <= self.max_texts):
            items, future = self._pending.pop(0)
            taken.append((items, future))
            count += len(items)
        self._count -= count
        return taken
