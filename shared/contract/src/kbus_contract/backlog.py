"""What waits for each stage, and for each tenant at each stage, as the server counts it.

Read by the services' gauges (``kbus_runtime.backlog``) and by ``kbus status``. A fair stage
(:mod:`kbus_contract.lanes`) takes each tenant's lane through a consumer of its own; a stage
with its one durable consumer (fair share off, or the deleter) is read from that consumer. Either
way the stream's per-subject counts say what each tenant has waiting, whether or not a consumer
for it exists yet: a work queue holds a message until it is acknowledged.
"""

from __future__ import annotations

from dataclasses import dataclass

from nats.js.api import ConsumerInfo
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError

from kbus_contract.lanes import Lane
from kbus_contract.requests import BacklogReply, LaneBacklog
from kbus_contract.topology import StageConsumer, Topology

#: Consumers the server lists in one page.
_PAGE = 256


@dataclass(frozen=True)
class TenantBacklog:
    """One tenant's lane at one stage: messages held (waiting or in flight)."""

    stage: str
    tenant: str
    lane: Lane
    messages: int


@dataclass(frozen=True)
class StageBacklog:
    """One stage: what waits, what is in flight, and each tenant's share of it."""

    stage: str
    stream: str
    consumer: str
    pending: int
    in_flight: int
    redelivered: int
    waiting_pulls: int
    #: Whether the stage has a consumer at all (its durable, or a tenant's lane).
    found: bool
    #: True: the stage serves tenants in turn (a consumer per tenant and lane).
    fair: bool
    tenants: tuple[TenantBacklog, ...] = ()


@dataclass(frozen=True)
class Held:
    """What a stage's stream holds for it (waiting or in flight), by tenant and lane."""

    lanes: dict[tuple[str, Lane], int]
    #: Subjects of the stage's channel of no form (no tenant's lane takes them): a fair stage
    #: takes each through a consumer of its own and dead-letters what it holds.
    strays: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.lanes.values()) + sum(self.strays.values())


async def held_for(js: JetStreamContext, topology: Topology, stage: StageConsumer) -> Held:
    """Messages each tenant's lanes hold in a stage's stream (waiting or in flight)."""
    try:
        info = await js.stream_info(stage.stream, subjects_filter=topology.queued(stage.channel))
    except NotFoundError:
        return Held({}, {})
    lanes: dict[tuple[str, Lane], int] = {}
    strays: dict[str, int] = {}
    for subject, count in (info.state.subjects or {}).items():
        if not count:
            continue
        found = topology.tenant_lane(stage.channel, subject)
        if found is None:
            strays[subject] = int(count)
        else:
            lanes[found] = lanes.get(found, 0) + int(count)
    return Held(lanes, strays)


async def lane_consumers(js: JetStreamContext, stage: StageConsumer) -> list[ConsumerInfo]:
    """The consumers of a stage's tenants' lanes."""
    found: list[ConsumerInfo] = []
    offset = 0
    while True:
        try:
            page = await js.consumers_info(stage.stream, offset)
        except NotFoundError:
            return found
        prefix = f"{stage.durable}_"
        found += [c for c in page if (c.name or "").startswith(prefix)]
        if len(page) < _PAGE:
            return found
        offset += len(page)


async def stage_backlog(
    js: JetStreamContext, topology: Topology, stage: StageConsumer
) -> StageBacklog:
    """One stage's backlog, from its durable consumer or its tenants' lane consumers."""
    held = await held_for(js, topology, stage)
    tenants = tuple(
        TenantBacklog(stage.stage, tenant, lane, count)
        for (tenant, lane), count in sorted(held.lanes.items())
    )
    try:
        info = await js.consumer_info(stage.stream, stage.durable)
    except NotFoundError:
        return _of_lanes(stage, await lane_consumers(js, stage), held.total, tenants)
    return StageBacklog(
        stage.stage,
        stage.stream,
        stage.durable,
        int(info.num_pending or 0),
        int(info.num_ack_pending or 0),
        int(info.num_redelivered or 0),
        int(info.num_waiting or 0),
        found=True,
        fair=False,
        tenants=tenants,
    )


def _of_lanes(
    stage: StageConsumer, lanes: list[ConsumerInfo], held: int, tenants: tuple[TenantBacklog, ...]
) -> StageBacklog:
    in_flight = sum(int(c.num_ack_pending or 0) for c in lanes)
    return StageBacklog(
        stage.stage,
        stage.stream,
        f"{stage.durable}_*",
        max(0, held - in_flight),
        in_flight,
        sum(int(c.num_redelivered or 0) for c in lanes),
        sum(int(c.num_waiting or 0) for c in lanes),
        # A fair stage's lane consumers come and go with its tenants' work.
        found=bool(lanes) or stage.fair,
        fair=stage.fair,
        tenants=tenants,
    )


async def backlogs(js: JetStreamContext, topology: Topology) -> list[StageBacklog]:
    """Every stage's backlog."""
    return [await stage_backlog(js, topology, stage) for stage in topology.stages]


async def tenant_backlog(js: JetStreamContext, topology: Topology, tenant: str) -> BacklogReply:
    """What one tenant's lanes hold at every stage, as the server counts its subjects."""
    lanes = []
    for stage in topology.stages:
        for lane in Lane:
            count = 0
            for subject in topology.lane_filters(stage.channel, tenant, lane):
                try:
                    info = await js.stream_info(stage.stream, subjects_filter=subject)
                except NotFoundError:
                    continue
                count += sum((info.state.subjects or {}).values())
            lanes.append(LaneBacklog(stage=stage.stage, lane=lane, messages=count))
    return BacklogReply(tenant=tenant, lanes=tuple(lanes))
