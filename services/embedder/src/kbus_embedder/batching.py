"""Micro-batching: chunks of many messages embedded in one model call.

A document has a handful of chunks; one model call per document leaves the model working on
small, unevenly padded batches. Handlers run concurrently and hand their texts to a
:class:`MicroBatcher`, which runs one call for everything that arrived within a short deadline
(or as soon as a full batch is waiting), then gives each caller its own rows back. Each message
is still acked on its own, after its own vectors are published.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

EmbedFn = Callable[[list[str]], Awaitable[np.ndarray]]
Waiting = list[tuple[list[str], "asyncio.Future[np.ndarray]"]]


class MicroBatcher:
    """Gathers texts from concurrent callers into batches of up to ``max_texts``."""

    def __init__(self, embed: EmbedFn, max_texts: int, max_wait_s: float) -> None:
        self._embed = embed
        self.max_texts = max_texts
        self.max_wait_s = max_wait_s
        self._pending: Waiting = []
        self._count = 0
        self._full = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

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
            if self._count < self.max_texts:
                self._full.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self.max_wait_s)
            batch = self._take()
            texts = [t for items, _ in batch for t in items]
            try:
                vectors = await self._embed(texts)
            except Exception as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
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
