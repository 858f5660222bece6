"""Threads that run model calls, urgent ones first.

A search's query waits for the encoder like any other call; behind a document backlog queued
in a plain FIFO pool it would wait for all of it. Here an urgent call (a query, a rerank) is
taken before every queued ordinary one (document batches), and calls of one kind run in the
order they were submitted.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_URGENT, _ORDINARY = 0, 1


class WorkerPool:
    """``workers`` daemon threads taking calls from one priority queue."""

    def __init__(self, workers: int, name: str, nice: int = 0) -> None:
        """``nice``: added to the threads' niceness (Linux schedules threads one by one)."""
        self._queue: queue.PriorityQueue[tuple[int, int, Callable[[], Any], Future[Any]]] = (
            queue.PriorityQueue()
        )
        self._order = itertools.count()
        self._nice = nice
        for n in range(workers):
            threading.Thread(target=self._work, name=f"{name}_{n}", daemon=True).start()

    def submit(self, call: Callable[[], T], *, urgent: bool = False) -> Future[T]:
        """Queue ``call``; its future holds the result or the exception."""
        future: Future[T] = Future()
        self._queue.put((_URGENT if urgent else _ORDINARY, next(self._order), call, future))
        return future

    def _work(self) -> None:
        if self._nice:
            thread = threading.get_native_id()
            nice = os.getpriority(os.PRIO_PROCESS, thread) + self._nice
            os.setpriority(os.PRIO_PROCESS, thread, min(nice, 19))
        while True:
            _, _, call, future = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call())
            except BaseException as exc:  # handed to the caller, who re-raises it
                future.set_exception(exc)
