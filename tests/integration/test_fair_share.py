"""Fair share on a real NATS, through the real ingestor: a second tenant's document overtakes
the first tenant's backlog, and a tenant's interactive document overtakes its own bulk work.

The backlog is published before the ingestor starts, so the order the stage took the documents
in (the order of its chunks in the chunks stream) depends on the scheduling alone."""

from __future__ import annotations

import json

import pytest
from faststream import TestApp
from kbus_contract import ChunksReady
from kbus_contract.lanes import Lane
from kbus_contract.topology import Topology
from kbus_ingestor.app import create_app
from kbus_ingestor.settings import IngestorSettings
from kbus_runtime.declaring import declare_streams
from kbus_runtime.settings import BusSettings
from nats.aio.client import Client

from tests.helpers import document, take_work

BACKLOG = 120


async def _taken_order(
    nc: Client, bus: BusSettings, topology: Topology, late: list[tuple[str, Lane]]
) -> list[str]:
    """The documents in the order the ingestor took them: ``BACKLOG`` of tenant ``bulk``,
    then one more of each (tenant, lane) in ``late``."""
    js = nc.jetstream()
    await declare_streams(js, topology)
    published = [("bulk", Lane.BULK, f"b{i}") for i in range(BACKLOG)]
    published += [(tenant, lane, f"late-{tenant}-{lane.value}") for tenant, lane in late]
    for tenant, lane, doc_id in published:
        payload = json.dumps(document(tenant, "lib", doc_id, f"Text of {doc_id}.")).encode()
        await js.publish(topology.accepted(topology.added(tenant, "lib", lane)), payload)
    async with TestApp(create_app(IngestorSettings(bus=bus, concurrency=1))):
        taken = await take_work(nc, topology.chunks_ready, "order", count=len(published))
    return [ChunksReady.model_validate(raw).document.document_id for raw in taken]


async def test_a_second_tenant_s_document_overtakes_the_first_tenant_s_backlog(
    nc: Client, bus: BusSettings, topology: Topology
) -> None:
    order = await _taken_order(nc, bus, topology, [("other", Lane.BULK)])
    # Served in turn: the other tenant's one document is among the first two taken.
    assert order.index("late-other-bulk") <= 1, order[:5]


async def test_an_interactive_document_overtakes_its_own_tenant_s_bulk_work(
    nc: Client, bus: BusSettings, topology: Topology
) -> None:
    order = await _taken_order(nc, bus, topology, [("bulk", Lane.INTERACTIVE)])
    assert order[0] == "late-bulk-interactive", order[:5]


async def test_a_weight_gives_a_tenant_that_many_turns(
    nc: Client, bus: BusSettings, topology: Topology
) -> None:
    # Two tenants with a backlog each; "gold" has weight 3.
    js = nc.jetstream()
    await declare_streams(js, topology)
    for i in range(40):
        for tenant in ("gold", "plain"):
            payload = json.dumps(document(tenant, "lib", f"{tenant}{i}", f"Text {i}.")).encode()
            await js.publish(topology.accepted(topology.added(tenant, "lib")), payload)
    weighted = bus.model_copy(update={"tenant_weights": {"gold": 3.0}})
    async with TestApp(create_app(IngestorSettings(bus=weighted, concurrency=1))):
        taken = await take_work(nc, topology.chunks_ready, "order", count=80)
    first = [ChunksReady.model_validate(raw).document.tenant for raw in taken][:40]
    assert first.count("gold") == pytest.approx(30, abs=2), first


async def test_without_fair_share_a_stage_takes_its_stream_in_order(
    nc: Client, bus: BusSettings, topology: Topology
) -> None:
    # The control: what every stage did before fair share.
    in_order = bus.model_copy(update={"fair_share": False})
    order = await _taken_order(
        nc, in_order, topology, [("other", Lane.BULK), ("bulk", Lane.INTERACTIVE)]
    )
    assert order[-2:] == ["late-other-bulk", "late-bulk-interactive"]


async def test_switching_fair_share_on_removes_the_durable_and_off_names_the_lanes(
    nc: Client, bus: BusSettings, topology: Topology
) -> None:
    in_order = bus.model_copy(update={"fair_share": False})
    js = nc.jetstream()
    await _taken_order(nc, in_order, topology, [])
    names = [c.name for c in await js.consumers_info(topology.documents_stream.name)]
    assert topology.ingestor_durable in names
    # On: the durable would take every tenant's subjects; it goes, the lanes take over.
    order = await _taken_order(nc, bus, topology, [("other", Lane.BULK)])
    assert order.index("late-other-bulk") <= 1
    names = [c.name for c in await js.consumers_info(topology.documents_stream.name)]
    assert topology.ingestor_durable not in names
    assert topology.stage("ingestor").lane_consumer("other", Lane.BULK) in names
    # Off again while the lanes exist: refused at start, naming them.
    with pytest.raises(RuntimeError, match="ingestor_bulk_other"):
        async with TestApp(create_app(IngestorSettings(bus=in_order))):
            pass
