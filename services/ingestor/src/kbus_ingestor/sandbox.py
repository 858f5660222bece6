"""Parsing in worker processes, bounded in time and memory.

A parser fed a hostile file (a PDF that loops, an archive that unpacks to gigabytes) must cost
one dead letter, never the ingestor: each parse runs in a worker process whose address space is
capped, and a parse that outlasts its time is ended by killing the workers. A parse that was
running beside it is retried (a transient error), never dead-lettered for another's fault.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import multiprocessing
import os
import resource
import signal
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from kbus_contract import ContentType, RecordTemplate
from kbus_contract.errors import ErrorCode, PermanentError, TransientError

from kbus_ingestor.parsing import Limits, Parsed, ParseError, parse

log = logging.getLogger("kbus.ingestor")


@dataclass(frozen=True)
class Failure:
    """A parse that ended with a :class:`ParseError` (exceptions with arguments do not
    always survive the trip between processes; this does)."""

    message: str
    code: str


def _start_worker(max_bytes: int, parent: int) -> None:
    """Cap the worker's memory, and end it with the service: a worker blocks on a queue whose
    writing end it holds itself, so it would outlive an ingestor that was killed."""
    resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the service died before the line above took effect
        os._exit(1)


_PR_SET_PDEATHSIG = 1


def _warm() -> None:
    """Import the parsers' libraries, so a first document does not pay for them."""
    import markitdown.converters  # noqa: F401
    import pypdf  # noqa: F401
    import trafilatura  # noqa: F401


def _parse(
    content_type: ContentType, data: bytes, template: RecordTemplate | None, limits: Limits
) -> Parsed | Failure:
    try:
        return parse(content_type, data, template, limits)
    except ParseError as exc:
        return Failure(exc.message, exc.code)
    except MemoryError:
        return Failure("parsing the document needed more memory than allowed", "too_large")
    except RecursionError:
        return Failure("the document is nested too deeply to parse", "unreadable")


class ParserPool:
    """Worker processes that parse documents, at most ``workers`` at a time."""

    def __init__(self, workers: int, timeout_s: float, memory_bytes: int, limits: Limits):
        self.workers = workers
        self.timeout_s = timeout_s
        self.memory_bytes = memory_bytes
        self.limits = limits
        self._slots = asyncio.Semaphore(workers)
        self._executor: ProcessPoolExecutor | None = None

    async def warm(self) -> None:
        """Start the workers and load the parsers' libraries in them."""
        loop = asyncio.get_running_loop()
        await asyncio.gather(
            *(loop.run_in_executor(self._pool(), _warm) for _ in range(self.workers))
        )

    async def parse(
        self, content_type: ContentType, data: bytes, template: RecordTemplate | None
    ) -> Parsed:
        """Parse in a worker.

        Raises:
            PermanentError: the document cannot be parsed, or not within the time or memory.
            TransientError: the workers were ended for another document's sake.
        """
        async with self._slots:
            pool = self._pool()
            work = asyncio.get_running_loop().run_in_executor(
                pool, _parse, content_type, data, template, self.limits
            )
            try:
                result = await asyncio.wait_for(work, self.timeout_s)
            except TimeoutError:
                self._end(pool)
                raise PermanentError(
                    f"parsing took longer than {self.timeout_s:g} s", code=ErrorCode.PARSE_TIMEOUT
                ) from None
            except BrokenProcessPool as exc:
                self._end(pool)
                raise TransientError(f"the parser's worker ended: {exc}") from exc
        if isinstance(result, Failure):
            raise PermanentError(result.message, code=result.code)
        return result

    def close(self) -> None:
        if self._executor is not None:
            self._end(self._executor)

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            # Not forked: the service's threads and event loop must not be copied.
            self._executor = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(self.memory_bytes, os.getpid()),
            )
        return self._executor

    def _end(self, pool: ProcessPoolExecutor) -> None:
        """Kill the workers (a parse cannot be interrupted any other way) and start anew."""
        if self._executor is pool:
            self._executor = None
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        log.warning("parser workers ended; new ones start with the next document")
