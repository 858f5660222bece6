"""Batching: what concurrent handlers hand in is worked on together, each gets its own outcome.

A stage handles many messages at once, and the work per message is mostly a fixed cost per
call (a model call that pads small batches, a round trip to Weaviate and the bus). Handlers hand
their item to a :class:`Batcher` and wait; it runs one call for everything that arrived within a
short linger (at once when a full batch is waiting, and at once when the linger is zero), then
gives each caller its own result or its own error. Each message is still acked on its own.

Up to ``in_flight`` calls run at once. A slot is taken before the linger starts, so items that
arrive while every slot is busy join the next call instead of waiting in a call of their own;
with two slots the next call is already queued when the current one ends.

An item may carry a key (its tenant): a call's places go to the keys in turn, charged by how
much of the call each item takes (:class:`~kbus_runtime.fair_share.Stride`), so one tenant's
many or large items delay another's by one call at most, not by all of theirs, and each tenant
with items waiting gets its weight's share of the calls' work. Within a key, an urgent item
(what a person waits for) goes before the others.

A call's span is a child of its first item's span and links to the others'.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Generic, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context

from kbus_runtime.fair_share import Stride
from kbus_runtime.tracing import batch_span

T = TypeVar("T")
R = TypeVar("R")

#: Runs one batch; returns, per item and in order, its result or the error it ends with.
RunBatch = Callable[[list[T]], Awaitable[Sequence[R | Exception]]]


@dataclass(frozen=True)
class _Pending(Generic[T, R]):
    """An item handed in, the future its caller waits on, and the caller's trace context."""

    item: T
    future: asyncio.Future[R]
    context: Context
    key: str = ""
    urgent: bool = False


@dataclass(eq=False)
class Batcher(Generic[T, R]):
    """Gathers items from concurrent callers into batches of up to ``max_size``.

    ``size`` says how much of a batch an item takes (one each by default); an item larger than
    a batch goes alone, and items are never split. ``on_batch`` is told each batch's size.
    """

    run: RunBatch[T, R]
    _: KW_ONLY
    max_size: int
    linger_s: float = 0.0
    in_flight: int = 1
    size: Callable[[T], int] = lambda _: 1
    on_batch: Callable[[int], None] | None = None
    name: str = "batch"
    _pending: list[_Pending[T, R]] = field(default_factory=list, init=False)
    _count: int = field(default=0, init=False)
    _full: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)
    _slots: asyncio.Semaphore = field(init=False)
    _calls: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    #: The keys' turns (weights: the tenants', where the stage has them).
    turns: Stride = field(default_factory=Stride)

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.in_flight)

    async def submit(self, item: T, key: str = "", *, urgent: bool = False) -> R:
        """Wait until the batch holding ``item`` has run; return its result or raise its error
        (``key``: whose item it is, served in turn with the other keys; ``urgent``: before the
        key's other items)."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        if not any(p.key == key for p in self._pending):
            self.turns.join(key)
        self._pending.append(_Pending(item, future, otel_context.get_current(), key, urgent))
        self._count += self.size(item)
        if self._count >= self.max_size:
            self._full.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            await self._slots.acquire()
            if self._count < self.max_size:
                self._full.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self.linger_s)
            call = asyncio.create_task(self._call(self._take()))
            self._calls.add(call)
            call.add_done_callback(self._calls.discard)

    async def _call(self, batch: list[_Pending[T, R]]) -> None:
        items = [pending.item for pending in batch]
        size = sum(self.size(item) for item in items)
        if self.on_batch is not None:
            self.on_batch(size)
        span = batch_span(self.name, [pending.context for pending in batch], size)
        try:
            with trace.use_span(span, end_on_exit=True):
                outcomes: Sequence[R | Exception] = await self.run(items)
        except Exception as exc:  # a failure of the whole batch is every item's
            outcomes = [exc] * len(batch)
        except asyncio.CancelledError:
            for pending in batch:
                pending.future.cancel()
            raise
        finally:
            self._slots.release()
        for pending, outcome in zip(batch, outcomes, strict=True):
            if pending.future.done():
                continue  # its caller was cancelled
            if isinstance(outcome, Exception):
                pending.future.set_exception(outcome)
            else:
                pending.future.set_result(outcome)

    def _take(self) -> list[_Pending[T, R]]:
        taken: list[_Pending[T, R]] = []
        count = 0
        while self._pending:
            index = self._next()
            size = self.size(self._pending[index].item)
            if taken and count + size > self.max_size:
                break
            pending = self._pending.pop(index)
            taken.append(pending)
            count += size
            self.turns.charge(pending.key, size)
        self._count -= count
        self.turns.sweep(p.key for p in self._pending)
        return taken

    def _next(self) -> int:
        """The next item of the key whose turn it is: its first urgent one, else its first."""
        key = self.turns.next(dict.fromkeys(p.key for p in self._pending))
        mine = [i for i, p in enumerate(self._pending) if p.key == key]
        return next((i for i in mine if self._pending[i].urgent), mine[0])
