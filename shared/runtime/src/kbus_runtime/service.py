"""What every service's ``app.py`` used to repeat: logging, metrics, the broker, the lifespan.

A service builds a :class:`Service` from its settings, hands its workers to its ``handlers``
module's ``register`` (subscriptions and request endpoints), and asks for the app. The app's
lifespan connects to NATS, declares the streams where the service may, enters the service's own
start-up (a model, a store, buckets), then starts answering requests; shutdown stops taking
requests and finishes the running ones before the broker drains.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from importlib.metadata import version

from faststream.asgi import AsgiFastStream, make_ping_asgi
from faststream.nats import NatsBroker
from kbus_contract.renewing import renewing
from kbus_contract.topology import StageConsumer, Topology
from prometheus_client import CollectorRegistry, make_asgi_app

from kbus_runtime.answering import Answer, Priced, Served, serve
from kbus_runtime.backlog import BacklogGauges
from kbus_runtime.budgets import Budgets, Resource, waiting_budget
from kbus_runtime.bus import BusMessage, Handler, held_credentials, make_broker, work_subscriber
from kbus_runtime.declaring import consumers_answer, declare_streams, one_kind_of_consumer
from kbus_runtime.fair_share import FairShare
from kbus_runtime.lanes import LanePuller, downstream_full, pull_fairly
from kbus_runtime.logs import configure_logging
from kbus_runtime.settings import ServiceSettings
from kbus_runtime.stage import Stage
from kbus_runtime.stage_metrics import StageMetrics
from kbus_runtime.tracing import start_tracing
from kbus_runtime.usage import Usage
from kbus_runtime.withdrawals import Withdrawals

#: Seconds a stopping service waits for its fetched messages to be handed back.
HAND_BACK_WAIT_S = 2.0
POLL_S = 0.05

#: A service's own start-up and shutdown, entered once NATS is connected.
StartUp = Callable[[], AbstractAsyncContextManager[None]]


@dataclass
class _Endpoints:
    """Request subjects served as one NATS micro service once the broker is connected."""

    answers: Mapping[str, Answer | Priced]
    description: str
    concurrency: int
    #: A tenant's work being answered at once, at most (None: no bound but its slots).
    work_in_flight: Callable[[str], float | None] | None = None


@dataclass
class Service:
    """One kbus service process: its name, settings, metrics registry, broker and topology."""

    name: str
    settings: ServiceSettings
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    _endpoints: list[_Endpoints] = field(default_factory=list)
    _served: list[Served] = field(default_factory=list)
    _consumers: list[tuple[str, str]] = field(default_factory=list)
    #: The fair stages this service consumes (kbus_contract.lanes).
    _stages: list[StageConsumer] = field(default_factory=list)
    #: Set on SIGTERM: every stage hands back what it has not started.
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        configure_logging(self.settings.process.log_level)
        self.topology: Topology = self.settings.bus.topology
        self.tracer_provider = start_tracing(self.name, self.settings.tracing)
        #: Its NATS credentials, moved to each renewal while it runs.
        self.held = held_credentials(self.settings.bus)
        self.broker: NatsBroker = make_broker(
            self.settings.bus,
            self.registry,
            app_name=self.name,
            log_level=self.settings.process.log_level,
            tracer_provider=self.tracer_provider,
            held=self.held,
        )
        self.metrics = StageMetrics(self.registry)
        self.budgets = Budgets(self.settings.budgets, self.topology)
        #: What each tenant holds of the shared streams, as the server counts it.
        self.usage = Usage(lambda: self.broker.connection.jetstream())
        #: What was deleted or published again since: opened by the services whose stages
        #: skip such work (and the gate, which remembers each publish).
        self.withdrawals = Withdrawals(self.topology)

    def stage(self, name: str | None = None) -> Stage:
        """A stage of this service (by default named as the service)."""
        return Stage(
            name or self.name,
            self.broker,
            self.topology,
            self.metrics,
            self.settings.bus.publish_retry_s,
            self.stopping,
            self.budgets,
            self.usage,
            self.settings.bus.outage_patience_s,
            self.withdrawals,
        )

    def consume(
        self, stage: str, handle: Handler, *, description: str, concurrency: int = 1
    ) -> None:
        """Hand a stage's messages to ``handle`` from its durable pull consumer
        (``concurrency`` at once), all of it as ``Topology.stages`` declares it; a fair stage's
        messages come from its tenants' lanes by turn instead (:mod:`kbus_runtime.lanes`)."""

        self.metrics.declare_stream_counters()
        consumer = self.topology.stage(stage)
        lanes = self._lanes_of(consumer)
        if lanes is None:
            self._consumers.append((consumer.stream, consumer.durable))

        async def on_message(message: BusMessage) -> None:
            await handle(message)

        subscriber = work_subscriber(
            self.broker,
            self.topology,
            self.topology.queued(consumer.channel),
            self.topology.stream_of(consumer),
            consumer.durable,
            title=f"{self.name}:{consumer.channel}",
            description=description,
            max_workers=1 if lanes else concurrency,
        )
        subscriber(on_message)
        if lanes is not None:
            pull_fairly(subscriber, lanes, concurrency, self.stopping)

    def _lanes_of(self, consumer: StageConsumer) -> LanePuller | None:
        """The source of a fair stage's messages, the stage noted as one this service takes by
        turn (None: the stage takes its stream in order)."""
        bus = self.settings.bus
        if not consumer.fair:
            return None
        self._stages.append(consumer)
        if not bus.fair_share:
            return None
        return LanePuller(
            lambda: self.broker.connection,
            self.topology,
            consumer,
            FairShare(bus.tenant_weights, window=consumer.window),
            bus.fair_share_poll_s,
            downstream_full(self.topology, consumer, waiting_budget(self.budgets, self.topology)),
        )

    def answer(
        self,
        answers: Mapping[str, Answer | Priced],
        *,
        description: str,
        concurrency: int,
        work_in_flight: Callable[[str], float | None] | None = None,
    ) -> None:
        """Serve catalog request subjects (``"kb.search"``, ...) once connected; an answer
        given as :class:`~kbus_runtime.answering.Priced` charges each request its price, and
        a tenant holds at most ``work_in_flight`` of it at once."""
        self.metrics.declare_request_counters()
        self._endpoints.append(_Endpoints(answers, description, concurrency, work_in_flight))

    def app(self, start_up: StartUp | None = None, *, declare: bool = True) -> AsgiFastStream:
        """The service as an ASGI app: the broker, ``/health`` and ``/metrics``.

        ``declare``: declare (or check) the streams at start; a service that consumes none
        need not.
        """

        backlog = BacklogGauges(self.registry, self.topology)

        @contextlib.asynccontextmanager
        async def lifespan() -> AsyncIterator[None]:
            await self.broker.connect()
            js = self.broker.connection.jetstream()
            if declare:
                await declare_streams(js, self.topology)
            await one_kind_of_consumer(js, self._stages, fair=self.settings.bus.fair_share)
            async with (
                renewing(self.held, self.broker.connection),
                start_up() if start_up else contextlib.nullcontext(),
                backlog.reading(js, self.settings.bus.backlog_interval_s),
            ):
                await self._serve()
                # Last, just before FastStream asks for each consumer once (a model's loading
                # may have taken seconds, in which a consumer's leader may have been lost).
                await consumers_answer(js, self._consumers)
                yield

        app = AsgiFastStream(
            self.broker,
            asgi_routes=[
                ("/health", make_ping_asgi(self.broker, timeout=2.0, include_in_schema=False)),
                ("/metrics", make_asgi_app(self.registry)),
            ],
            lifespan=lifespan,
        )

        @app.on_shutdown
        async def stop_serving() -> None:
            # Before the broker stops its subscribers (finishing the messages being worked
            # on): hand back the ones fetched but not started, stop answering requests, and
            # answer the ones given.
            self.stopping.set()
            await _queues_emptied(self.broker)
            while self._served:
                await self._served.pop().stop()

        @app.after_shutdown
        async def flush_traces() -> None:
            if self.tracer_provider is not None:
                self.tracer_provider.shutdown()

        return app

    async def _serve(self) -> None:
        package = f"kbus-{self.name}"
        for endpoints in self._endpoints:
            self._served.append(
                await serve(
                    self.broker.connection,
                    self.topology,
                    endpoints.answers,
                    version=version(package),
                    description=endpoints.description,
                    concurrency=endpoints.concurrency,
                    per_tenant=lambda tenant: (
                        self.budgets.of(tenant).count(Resource.REQUESTS_IN_FLIGHT) or None
                    ),
                    work_in_flight=endpoints.work_in_flight,
                    weights=self.settings.bus.tenant_weights,
                )
            )


async def _queues_emptied(broker: NatsBroker, within_s: float = HAND_BACK_WAIT_S) -> None:
    """Wait until the messages FastStream fetched for a stage but has not handed to it yet
    have reached it (a stopping stage hands each back at once), for at most ``within_s``."""
    queues = [q for s in broker.subscribers if (q := getattr(s, "receive_stream", None))]
    for _ in range(round(within_s / POLL_S)):
        if not any(q.statistics().current_buffer_used for q in queues):
            return
        await asyncio.sleep(POLL_S)
