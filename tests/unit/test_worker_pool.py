"""The encoder's worker pool: urgent calls first, results and errors to the caller."""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, wait
from functools import partial

import pytest
from kbus_models.pool import WorkerPool


def test_an_urgent_call_runs_before_ordinary_calls_queued_earlier() -> None:
    pool = WorkerPool(1, "test")
    release = threading.Event()
    ran: list[str] = []
    futures: list[Future[object]] = [pool.submit(release.wait)]
    futures += [pool.submit(partial(ran.append, f"document {n}")) for n in range(3)]
    futures.append(pool.submit(partial(ran.append, "query"), urgent=True))
    release.set()
    wait(futures, timeout=5)
    assert ran == ["query", "document 0", "document 1", "document 2"]


def test_results_and_exceptions_reach_the_caller() -> None:
    pool = WorkerPool(2, "test")

    def fail() -> None:
        raise ValueError("bad batch")

    assert pool.submit(lambda: 6 * 7).result(timeout=5) == 42
    with pytest.raises(ValueError, match="bad batch"):
        pool.submit(fail).result(timeout=5)
    assert pool.submit(lambda: "still working").result(timeout=5) == "still working"


def _niceness() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_a_nice_pool_runs_its_calls_on_threads_that_much_nicer() -> None:
    base = os.getpriority(os.PRIO_PROCESS, 0)
    nice = WorkerPool(2, "nice", nice=5)
    plain = WorkerPool(1, "plain")

    assert nice.submit(_niceness).result(timeout=10) == min(base + 5, 19)
    assert plain.submit(_niceness).result(timeout=10) == base
    assert _niceness() == base  # the caller's thread is untouched
