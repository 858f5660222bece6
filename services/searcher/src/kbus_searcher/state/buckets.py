"""Key-value buckets the searcher keeps, with an in-memory copy kept current by a watch.

A copy answers without a round trip but may lag the bucket by a moment: callers use it only
where a stale answer is safe (a hint later confirmed from the bucket itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from kbus_runtime.declaring import open_bucket
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig
from nats.js.kv import KeyValue

log = logging.getLogger("kbus.searcher")

T = TypeVar("T")


class FollowedBucket(Generic[T]):
    """A bucket and, once following, a copy of its live keys parsed by ``parse``."""

    def __init__(self, config: KeyValueConfig, parse: Callable[[bytes], T]) -> None:
        self.config = config
        self._parse = parse
        self._kv: KeyValue | None = None
        self._values: dict[str, T] = {}
        self._task: asyncio.Task[None] | None = None

    async def open(self, js: JetStreamContext, *, create: bool = True) -> None:
        """Open the bucket, creating it if allowed."""
        self._kv = await open_bucket(js, self.config, create=create)

    @property
    def kv(self) -> KeyValue:
        if self._kv is None:
            raise RuntimeError(f"bucket {self.config.bucket} is not open")
        return self._kv

    async def follow(self) -> None:
        """Keep the copy (a failure to watch leaves the copy off, not the service)."""
        try:
            watcher = await self.kv.watchall()
        except Exception as exc:
            log.warning("not following %s (it is read instead): %s", self.config.bucket, exc)
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

    def copied(self, key: str) -> T | None:
        """The copy's value of a key (None: absent, or not following)."""
        return self._values.get(key) if self.following else None
