"""Costly work at a lower CPU priority: a cheap request of another tenant goes first.

A replica's event loop answers every tenant's requests; the CPU work of a costly one (a large
context cut and counted, a long query scored against many candidates) runs on threads of their
own whose niceness is raised (Linux schedules threads one by one), so that when the cores are
contended a cheap request's work, at the ordinary priority, is scheduled first and the costly
one takes what is left. Nothing is slower on an idle machine: niceness only orders contenders.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TypeVar

T = TypeVar("T")

#: Niceness added to the threads of costly work (the embedder's document batches' too).
NICE = 10


def _lowered(nice: int) -> None:
    thread = threading.get_native_id()
    # A platform without per-thread priorities runs them at the process's.
    with contextlib.suppress(OSError):
        os.setpriority(
            os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + nice)
        )


class Background:
    """Threads that run costly calls at a lower priority."""

    def __init__(self, workers: int = 2, nice: int = NICE, name: str = "costly") -> None:
        self._pool = ThreadPoolExecutor(
            workers, thread_name_prefix=name, initializer=partial(_lowered, nice)
        )

    async def run(self, call: Callable[..., T], *args: object) -> T:
        """``call(*args)`` on one of the threads, awaited."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, partial(call, *args))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
