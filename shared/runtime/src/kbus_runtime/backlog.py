"""The bus as Prometheus sees it: every stage's backlog and every stream's use of its limit.

Every service reports every stage, read from the server every few seconds, so a stage whose
replicas are all gone still shows its backlog growing (through the others); dashboards and
alerts take the largest report of each. The server's figures are the truth: a service cannot
count what waits for a consumer that is not running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from kbus_contract.backlog import backlogs
from kbus_contract.topology import Topology
from nats.errors import Error as NatsError
from nats.js.client import JetStreamContext
from nats.js.errors import NotFoundError
from prometheus_client import CollectorRegistry, Gauge

log = logging.getLogger("kbus")


class BacklogGauges:
    """Gauges of the stages' consumers and the streams, set from the server's figures."""

    def __init__(self, registry: CollectorRegistry, topology: Topology) -> None:
        self.topology = topology

        def gauge(name: str, text: str, label: str) -> Gauge:
            return Gauge(name, text, [label], registry=registry)

        self.pending = gauge(
            "kbus_stage_pending", "Messages waiting for a stage (not yet delivered)", "stage"
        )
        self.in_flight = gauge(
            "kbus_stage_in_flight",
            "Messages delivered to a stage and not yet acknowledged",
            "stage",
        )
        self.redelivered = gauge(
            "kbus_stage_redelivered", "Messages of a stage delivered more than once", "stage"
        )
        self.waiting_pulls = gauge(
            "kbus_stage_waiting_pulls", "Open fetch requests of a stage's workers", "stage"
        )
        self.tenant_held = Gauge(
            "kbus_tenant_backlog",
            "Messages of a tenant's lane held for a stage (waiting or in flight)",
            ["stage", "tenant", "lane"],
            registry=registry,
        )
        #: The tenant gauges set at the last read, removed once their tenant holds none.
        self._shown: set[tuple[str, str, str]] = set()
        self.stream_bytes = gauge("kbus_stream_bytes", "Bytes a stream holds", "stream")
        self.stream_messages = gauge("kbus_stream_messages", "Messages a stream holds", "stream")
        self.stream_limit = gauge(
            "kbus_stream_limit_bytes", "The most bytes a stream may hold", "stream"
        )

    async def read(self, js: JetStreamContext) -> None:
        """Read every stage's consumer and every stream once."""
        shown: set[tuple[str, str, str]] = set()
        for stage in await backlogs(js, self.topology):
            if not stage.found:
                continue  # not declared yet: its service has not started
            self.pending.labels(stage.stage).set(stage.pending)
            self.in_flight.labels(stage.stage).set(stage.in_flight)
            self.redelivered.labels(stage.stage).set(stage.redelivered)
            self.waiting_pulls.labels(stage.stage).set(stage.waiting_pulls)
            for held in stage.tenants:
                labels = (held.stage, held.tenant, held.lane.value)
                self.tenant_held.labels(*labels).set(held.messages)
                shown.add(labels)
        for gone in self._shown - shown:
            self.tenant_held.remove(*gone)
        self._shown = shown
        for stream in self.topology.streams:
            try:
                described = await js.stream_info(stream.name)
            except NotFoundError:
                continue
            self.stream_bytes.labels(stream.name).set(described.state.bytes)
            self.stream_messages.labels(stream.name).set(described.state.messages)
            self.stream_limit.labels(stream.name).set(described.config.max_bytes or -1)

    @contextlib.asynccontextmanager
    async def reading(self, js: JetStreamContext, interval_s: float) -> AsyncIterator[None]:
        """Read every ``interval_s`` while inside (not at all for 0)."""
        task = asyncio.create_task(self._every(js, interval_s)) if interval_s > 0 else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _every(self, js: JetStreamContext, interval_s: float) -> None:
        while True:
            try:
                await self.read(js)
            except (NatsError, TimeoutError) as exc:
                # The server away, or too busy to answer: the next read will tell.
                log.debug("could not read the backlog: %s", exc)
            except Exception:
                log.exception("could not read the backlog")
            await asyncio.sleep(interval_s)
