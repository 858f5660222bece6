"""An in-memory copy of a key-value bucket, kept current by a watch.

A copy answers without a round trip but may lag the bucket by a moment: callers use it only
where a stale answer is safe (a hint later confirmed from the bucket itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from nats.js.kv import KeyValue

log = logging.getLogger("kbus.searcher")

T = TypeVar("T")


class BucketCopy(Generic[T]):
    """Key to parsed value for every live key of a bucket, while following."""

    def __init__(self, parse: Callable[[bytes], T]) -> None:
        self._parse = parse
        self._values: dict[str, T] = {}
        self._task: asyncio.Task[None] | None = None

    async def follow(self, kv: KeyValue, bucket: str) -> None:
        """Start following ``kv`` (a failure to watch leaves the copy off, not the service)."""
        try:
            watcher = await kv.watchall()
        except Exception as exc:
            log.warning("not following %s (it is read instead): %s", bucket, exc)
            return

        async def apply() -> None:
            async for entry in watcher:
                if entry is None:
                    continue  # the end of the initial values
                if entry.operation in ("DEL", "PURGE") or not entry.value:
                    self._values.pop(entry.key, None)
                else:
                    self._values[entry.key] = self._parse(entry.value)

        self._task = asyncio.create_task(apply())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    @property
    def following(self) -> bool:
        return self._task is not None and not self._task.done()

    def get(self, key: str) -> T | None:
        return self._values.get(key)
