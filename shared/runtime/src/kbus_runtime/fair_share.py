"""Whose work goes next: each tenant with work waiting in turn, by weight, charged in work.

Turns are counted in what the work costs, never in messages or requests: a message of 64
chunks costs 64 times a message of one, a costly search its estimate
(:mod:`kbus_contract.work`). :class:`Stride` is the one rule, used wherever tenants wait for the
same thing (a stage's lanes here, a batch's places in :mod:`kbus_runtime.batching`, a replica's
request slots in :mod:`kbus_runtime.answering`):

Stride scheduling: every tenant has a pass, and the next turn goes to the waiting tenant with
the lowest; a turn adds ``cost / weight`` to its pass, so a tenant of weight 4 gets four times
another's work, and a tenant whose messages are large gets as much work done as one whose
messages are small, in fewer turns. A tenant that starts waiting joins at the pass of the turn
being served (the clock), so waiting nothing earns no credit (a tenant idle for an hour does
not take the next hour) and a newcomer goes next: it waits for at most one turn of each tenant
already waiting.

:class:`FairGate` is the same for work a replica does in slots (a model's calls).

:class:`FairShare` is a fair stage's choice of lane (:mod:`kbus_runtime.lanes`): what waits is
told by :meth:`FairShare.observe` (from the server, every moment) and corrected by
:meth:`FairShare.found_empty` (a fetch that found nothing); a turn is charged an estimate when
taken and its message's own cost once fetched; and a tenant holds at most its ``window`` of work
in each lane in the replica at once, so the replica's workers are never all one tenant's while
another's work waits. Within a tenant, its interactive lane goes before its bulk lane. Pure
logic: the workers of a replica share one instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field

from kbus_contract.lanes import Lane

#: The order a tenant's lanes are served in.
LANE_ORDER = (Lane.INTERACTIVE, Lane.BULK)


class Stride:
    """The passes of the tenants waiting for one thing (pure logic)."""

    def __init__(self, weights: Mapping[str, float] | None = None, default: float = 1.0) -> None:
        self.weights = dict(weights or {})
        self.default = default
        self._pass: dict[str, float] = {}
        self._served_at: dict[str, int] = {}
        self._ticks = itertools.count(1)
        #: The pass at which the last turn started: where a tenant that starts waiting joins.
        self.clock = 0.0

    def weight(self, tenant: str) -> float:
        return self.weights.get(tenant, self.default)

    def join(self, tenant: str) -> None:
        """``tenant`` starts waiting: at its own pass, or the clock if that is ahead."""
        self._pass[tenant] = max(self._pass.get(tenant, self.clock), self.clock)

    def pass_of(self, tenant: str) -> float:
        return self._pass.get(tenant, self.clock)

    def next(self, waiting: Iterable[str]) -> str | None:
        """The waiting tenant whose turn it is: the lowest pass, then the one served longest
        ago (never served: first)."""
        return min(
            waiting,
            key=lambda t: (self.pass_of(t), self._served_at.get(t, 0)),
            default=None,
        )

    def charge(self, tenant: str, cost: float) -> None:
        """A turn of ``cost`` served to ``tenant``."""
        start = self.pass_of(tenant)
        self._pass[tenant] = start + cost / self.weight(tenant)
        self._served_at[tenant] = next(self._ticks)
        self.clock = max(self.clock, start)

    def correct(self, tenant: str, cost: float) -> None:
        """Add ``cost`` (less than nothing: give back) to a turn already charged: its estimate
        was off."""
        self._pass[tenant] = self.pass_of(tenant) + cost / self.weight(tenant)

    def sweep(self, waiting: Iterable[str]) -> None:
        """Drop what is kept of the tenants not ``waiting`` whose pass is behind the clock:
        they would join at the clock anyway (thousands of tenants come and go). One whose pass
        is ahead (it was just served much work) keeps it until the clock passes it."""
        keep = set(waiting)
        for tenant in [t for t, p in self._pass.items() if p <= self.clock and t not in keep]:
            del self._pass[tenant]
            self._served_at.pop(tenant, None)

    def known(self) -> int:
        """Tenants kept (a bound the tests check)."""
        return len(self._pass)


@dataclass(frozen=True)
class Turn:
    """One fetch a worker makes: the lane, and the work charged for it until its message says."""

    tenant: str
    lane: Lane
    estimate: float


@dataclass
class _Tenant:
    #: Messages believed waiting in each lane (the server's count, less what was taken since).
    waiting: dict[Lane, int] = field(default_factory=dict)
    #: Work held by this replica in each lane: charged when taken, released when settled.
    in_flight: dict[Lane, float] = field(default_factory=dict)
    #: What one of its messages has recently cost here: the estimate a turn is charged.
    typical: float = 1.0

    @property
    def active(self) -> bool:
        return any(self.waiting.values())

    @property
    def holds(self) -> bool:
        return any(v > 0 for v in self.in_flight.values())

    def lane_to_take(self, window: float) -> Lane | None:
        """Its first lane with work waiting and room in its ``window`` (a lane holding nothing
        always has room)."""
        for lane in LANE_ORDER:
            held = self.in_flight.get(lane, 0.0)
            if self.waiting.get(lane, 0) > 0 and (held <= 0 or held < window):
                return lane
        return None


class FairShare:
    """The turn of each tenant with work waiting, for one stage of one replica."""

    def __init__(
        self,
        weights: Mapping[str, float] | None = None,
        default: float = 1.0,
        window: float = float("inf"),
    ) -> None:
        self.stride = Stride(weights, default)
        #: The most work one tenant of weight 1 holds in each lane in this replica at once (more
        #: if one message is more); a tenant of weight 3 holds three times as much.
        self.window = window
        self._tenants: dict[str, _Tenant] = {}

    def weight(self, tenant: str) -> float:
        return self.stride.weight(tenant)

    def observe(self, waiting: Mapping[tuple[str, Lane], int]) -> None:
        """What the server says waits now, per tenant and lane (absent: nothing)."""
        was_active = {name for name, t in self._tenants.items() if t.active}
        for state in self._tenants.values():
            state.waiting.clear()
        for (tenant, lane), count in waiting.items():
            if count > 0:
                self._tenants.setdefault(tenant, _Tenant()).waiting[lane] = count
        for name, state in self._tenants.items():
            if state.active and name not in was_active:
                self.stride.join(name)
        self._forget_idle()

    def take(self) -> Turn | None:
        """The tenant and lane to fetch one message from next (None: nothing waits that may be
        taken now). A tenant's interactive lane goes first, and each of its lanes holds at
        most the window in this replica."""
        ready = {
            name: lane
            for name, t in self._tenants.items()
            if (lane := t.lane_to_take(self.window * self.weight(name))) is not None
        }
        name = self.stride.next(ready)
        if name is None:
            return None
        chosen, lane = self._tenants[name], ready[name]
        chosen.waiting[lane] -= 1
        estimate = chosen.typical
        chosen.in_flight[lane] = chosen.in_flight.get(lane, 0.0) + estimate
        self.stride.charge(name, estimate)
        return Turn(name, lane, estimate)

    def fetched(self, turn: Turn, cost: float) -> None:
        """The turn's message arrived and costs ``cost``: charged instead of the estimate."""
        state = self._tenants.setdefault(turn.tenant, _Tenant())
        state.in_flight[turn.lane] = state.in_flight.get(turn.lane, 0.0) + cost - turn.estimate
        state.typical = cost
        self.stride.correct(turn.tenant, cost - turn.estimate)

    def settled(self, turn: Turn, cost: float) -> None:
        """A message of ``cost`` this replica held is settled: its work is no longer held."""
        state = self._tenants.get(turn.tenant)
        if state is not None:
            state.in_flight[turn.lane] = max(0.0, state.in_flight.get(turn.lane, 0.0) - cost)

    def found_empty(self, turn: Turn) -> None:
        """A fetch from a lane found nothing (the rest were in flight): its turn is given back,
        and it is not tried again before the server says it holds more."""
        state = self._tenants.get(turn.tenant)
        if state is None:
            return
        state.waiting[turn.lane] = 0
        held = state.in_flight.get(turn.lane, 0.0)
        state.in_flight[turn.lane] = max(0.0, held - turn.estimate)
        self.stride.correct(turn.tenant, -turn.estimate)

    def waiting(self) -> dict[tuple[str, Lane], int]:
        """What is believed waiting, per tenant and lane."""
        return {
            (name, lane): count
            for name, t in self._tenants.items()
            for lane, count in t.waiting.items()
            if count > 0
        }

    def held(self, tenant: str) -> float:
        """The work of ``tenant`` this replica holds."""
        state = self._tenants.get(tenant)
        return sum(state.in_flight.values()) if state is not None else 0.0

    def _forget_idle(self) -> None:
        idle = [n for n, t in self._tenants.items() if not t.active and not t.holds]
        for name in idle:
            del self._tenants[name]
        self.stride.sweep(self._tenants)


@dataclass(eq=False)
class _Waiter:
    future: asyncio.Future[None]
    cost: float
    urgent: bool


class FairGate:
    """At most ``slots`` pieces of work at once (a model's calls), given to the tenants waiting
    by :class:`Stride`, each charged its cost; within a tenant, urgent work first."""

    def __init__(self, slots: int, weights: Mapping[str, float] | None = None) -> None:
        self.free = slots
        self.turns = Stride(weights)
        self._waiting: dict[str, deque[_Waiter]] = {}

    @contextlib.asynccontextmanager
    async def turn(
        self, tenant: str, cost: float = 1.0, urgent: bool = False
    ) -> AsyncIterator[None]:
        """Hold a slot while the block runs, once it is ``tenant``'s turn."""
        if not self._waiting.get(tenant):
            self.turns.join(tenant)
        waiter = _Waiter(asyncio.get_running_loop().create_future(), cost, urgent)
        self._waiting.setdefault(tenant, deque()).append(waiter)
        self._grant()
        try:
            await waiter.future
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled():
                self._release()  # granted as it was cancelled: its slot goes back
            else:
                self._forget(tenant, waiter)
            raise
        try:
            yield
        finally:
            self._release()

    def _grant(self) -> None:
        while self.free > 0:
            tenant = self.turns.next(t for t, q in self._waiting.items() if q)
            if tenant is None:
                return
            queue = self._waiting[tenant]
            waiter = next((w for w in queue if w.urgent), queue[0])
            queue.remove(waiter)
            if not queue:
                del self._waiting[tenant]
            self.turns.charge(tenant, waiter.cost)
            self.free -= 1
            waiter.future.set_result(None)
        self.turns.sweep(self._waiting)

    def _release(self) -> None:
        self.free += 1
        self._grant()

    def _forget(self, tenant: str, waiter: _Waiter) -> None:
        queue = self._waiting.get(tenant)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._waiting[tenant]
