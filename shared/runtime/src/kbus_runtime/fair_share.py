"""Which tenant's work a stage takes next: each tenant with work waiting in turn, by weight.

Stride scheduling: every tenant has a pass, and the next message comes from the waiting tenant
with the lowest; taking one adds ``1 / weight`` to its pass, so a tenant of weight 4 is served
four times for another's once. A tenant that starts waiting joins at the pass of the tenants
already served, so waiting nothing earns no credit (a tenant idle for an hour does not take the
next hour). Within a tenant, its interactive lane goes before its bulk lane.

Pure logic: what waits is told by :meth:`FairShare.observe` (from the server, every moment)
and corrected by :meth:`FairShare.found_empty` (a fetch that found nothing); the workers of a
replica share one instance.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

from kbus_contract.lanes import Lane

#: The order a tenant's lanes are served in.
LANE_ORDER = (Lane.INTERACTIVE, Lane.BULK)


@dataclass
class _Tenant:
    weight: float
    pass_: float = 0.0
    #: Messages believed waiting in each lane (the server's count, less what was taken since).
    waiting: dict[Lane, int] = field(default_factory=dict)
    #: When it was last served (a tie goes to the one served longest ago).
    served_at: int = 0

    @property
    def active(self) -> bool:
        return any(self.waiting.values())


class FairShare:
    """The turn of each tenant with work waiting, for one stage of one replica."""

    def __init__(self, weights: Mapping[str, float] | None = None, default: float = 1.0) -> None:
        self.weights = dict(weights or {})
        self.default = default
        self._tenants: dict[str, _Tenant] = {}
        self._ticks = itertools.count(1)
        #: The pass of the last tenant served: where a tenant that starts waiting joins.
        self._clock = 0.0

    def weight(self, tenant: str) -> float:
        return self.weights.get(tenant, self.default)

    def observe(self, waiting: Mapping[tuple[str, Lane], int]) -> None:
        """What the server says waits now, per tenant and lane (absent: nothing)."""
        was_active = {name for name, t in self._tenants.items() if t.active}
        for state in self._tenants.values():
            state.waiting.clear()
        for (tenant, lane), count in waiting.items():
            if count > 0:
                state = self._tenants.get(tenant) or _Tenant(self.weight(tenant))
                self._tenants[tenant] = state
                state.waiting[lane] = count
        for name, state in self._tenants.items():
            if state.active and name not in was_active:
                state.pass_ = max(state.pass_, self._clock)
        self._forget_idle()

    def take(self) -> tuple[str, Lane] | None:
        """The tenant and lane to fetch one message from next (None: nothing waits)."""
        active = [(name, t) for name, t in self._tenants.items() if t.active]
        if not active:
            return None
        name, chosen = min(active, key=lambda item: (item[1].pass_, item[1].served_at))
        lane = next(lane for lane in LANE_ORDER if chosen.waiting.get(lane, 0) > 0)
        chosen.waiting[lane] -= 1
        chosen.pass_ += 1.0 / chosen.weight
        chosen.served_at = next(self._ticks)
        self._clock = max(self._clock, chosen.pass_ - 1.0 / chosen.weight)
        return name, lane

    def found_empty(self, tenant: str, lane: Lane) -> None:
        """A fetch from a lane found nothing (the rest were in flight): its turn is given back,
        and it is not tried again before the server says it holds more."""
        state = self._tenants.get(tenant)
        if state is None:
            return
        state.waiting[lane] = 0
        state.pass_ -= 1.0 / state.weight

    def waiting(self) -> dict[tuple[str, Lane], int]:
        """What is believed waiting, per tenant and lane."""
        return {
            (name, lane): count
            for name, t in self._tenants.items()
            for lane, count in t.waiting.items()
            if count > 0
        }

    def _forget_idle(self) -> None:
        # A tenant with nothing waiting whose pass is behind the clock would rejoin at the clock
        # anyway: nothing of it needs keeping (thousands of tenants come and go).
        idle = [n for n, t in self._tenants.items() if not t.active and t.pass_ <= self._clock]
        for name in idle:
            del self._tenants[name]
