"""Bus wiring every service shares: the broker, plain connections and stage subscriptions."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import nats
from faststream import AckPolicy
from faststream._internal.context import Context
from faststream.nats import JStream, NatsBroker, PullSub
from faststream.nats.message import NatsMessage
from faststream.nats.opentelemetry import NatsTelemetryMiddleware
from faststream.nats.prometheus import NatsPrometheusMiddleware
from faststream.security import BaseSecurity
from kbus_contract.renewing import HeldCredentials
from kbus_contract.topology import Stream, Topology, work_consumer
from nats.aio.client import Client
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from kbus_runtime.settings import BusSettings

log = logging.getLogger("kbus")

JSON_HEADERS = {"content-type": "application/json"}


class _LoopContext(Context):
    """FastStream's context field, resolved on the event loop.

    fast_depends resolves a field with a synchronous ``use`` through anyio's ``to_thread``: a
    hand-off to a worker thread and back for every message, for what is a dictionary lookup.
    An ``async`` ``use`` is awaited in place (docs/tuning.md, "The message parameter").
    """

    async def use(self, /, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        return super().use(**kwargs)


#: The handler parameter for the message being handled (FastStream's ``NatsMessage``
#: annotation, without the thread hand-off).
BusMessage = Annotated[NatsMessage, _LoopContext("message")]

#: A stage's handler of one stream message.
Handler = Callable[[NatsMessage], Awaitable[None]]


class Refusals:
    """The server's refusals of what a connection sent (a permissions violation): each cause
    logged once, as a refusal, not as the broken connection FastStream would report."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def handled(self, err: Exception) -> bool:
        """Whether ``err`` was a refusal (then it is counted, and logged the first time)."""
        text = str(err).removeprefix("nats: ")
        if "permissions violation" not in text.lower():
            return False
        self.seen[text] = self.seen.get(text, 0) + 1
        if self.seen[text] == 1:
            log.warning("the NATS server refused this: %s (logged once per cause)", text)
        return True

    async def on_error(self, err: Exception) -> None:
        """An error callback for a plain nats-py connection."""
        if not self.handled(err):
            log.warning("NATS connection error: %s", err)


class _Broker(NatsBroker):
    """FastStream's broker, with the server's refusals logged by :class:`Refusals`."""

    refusals = Refusals()

    def _log_connection_broken(self, error_cb: Any = None) -> Any:
        broken = super()._log_connection_broken(error_cb)

        async def on_error(err: Exception) -> None:
            if not self.refusals.handled(err):
                await broken(err)

        return on_error


def make_broker(
    settings: BusSettings,
    registry: CollectorRegistry,
    app_name: str,
    log_level: str = "INFO",
    tracer_provider: TracerProvider | None = None,
    held: HeldCredentials | None = None,
) -> NatsBroker:
    """A NATS broker with Prometheus metrics; it connects when the app starts.

    Args:
        held: The service's credentials (:func:`held_credentials`).
        log_level: The service's log level; FastStream's line per message shows at DEBUG.
        tracer_provider: Traces on: stream messages carry and continue the trace context.
    """
    middlewares: list[Any] = [NatsPrometheusMiddleware(registry=registry, app_name=app_name)]
    if tracer_provider is not None:
        middlewares.append(
            NatsTelemetryMiddleware(
                tracer_provider=tracer_provider, include_messages_counters=False
            )
        )
    tls = settings.tls_context()
    broker = _Broker(
        settings.nats_servers,
        security=BaseSecurity(ssl_context=tls) if tls is not None else None,
        **credentials(settings, held),
        name=f"kbus-{app_name}",
        inbox_prefix=settings.inbox_prefix,
        middlewares=middlewares,
        # FastStream's "Received"/"Processed" lines, two per message and stage, were most of
        # the services' logs and a measurable share of a stage's busy time.
        log_level=logging.DEBUG,
        graceful_timeout=30.0,
        max_reconnect_attempts=-1,
        reconnect_time_wait=1,
    )
    # FastStream ties its logger's level to the level of its per-message lines; untie them, so
    # the lines are filtered unless the service logs at DEBUG, and failures always show.
    broker.config.logger.params_storage.set_level(logging.getLevelName(log_level.upper()))
    return broker


async def connect_nats(bus: BusSettings) -> Client:
    """A plain NATS connection with the service's credentials and inbox prefix (for jobs)."""
    options: dict[str, Any] = {"inbox_prefix": bus.inbox_prefix, "error_cb": Refusals().on_error}
    tls = bus.tls_context()
    if tls is not None:
        options["tls"] = tls
    return await nats.connect(bus.nats_servers, **options, **credentials(bus))


def held_credentials(bus: BusSettings) -> HeldCredentials | None:
    """The service's credentials, read again from their file for renewals (none on an open
    server)."""
    if bus.nats_credentials_file is not None:
        path = Path(bus.nats_credentials_file)
        try:
            return HeldCredentials(path.read_text, str(path))
        except (OSError, ValueError) as exc:
            raise ValueError(
                f"KBUS_NATS_CREDENTIALS_FILE {path} holds no NATS credentials "
                f"({getattr(exc, 'strerror', None) or exc}): point it at the service's .creds file"
            ) from None
    if bus.nats_credentials is not None:
        return HeldCredentials(bus.nats_credentials.get_secret_value, "KBUS_NATS_CREDENTIALS")
    return None


def credentials(bus: BusSettings, held: HeldCredentials | None = None) -> dict[str, Any]:
    """nats.connect's options for the service's credentials (none on an open server)."""
    held = held or held_credentials(bus)
    return held.options() if held is not None else {}


def work_subscriber(
    broker: NatsBroker,
    topology: Topology,
    subject: str,
    stream: Stream,
    durable: str,
    *,
    title: str,
    description: str,
    max_workers: int = 1,
    fetch_batch: int = 1,
) -> Callable[[Handler], Any]:
    """The subscription of a pipeline stage: its shared durable pull consumer, acked by hand.

    FastStream's default for JetStream handlers terminates a message on any exception;
    :meth:`kbus_runtime.stage.Stage.settle` decides every ack instead, and ``no_reply`` keeps
    FastStream from publishing where a message's ``reply_to`` header says. With ``max_workers``
    above one, that many messages are handled at once. The stream is declared by
    :mod:`kbus_runtime.declaring` before any subscriber starts, so FastStream never declares it.

    Messages are fetched ``fetch_batch`` at a time, one by default (concurrency comes from
    ``max_workers``): on an idle consumer nats-py's fetch of more than one waits for the rest of
    the batch until its timeout, which holds a lone document back by up to that timeout. Single
    fetches cost more CPU per message under load (docs/tuning.md, "Fetching one message at a
    time").
    """
    subscribe: Callable[[Handler], Any] = broker.subscriber(
        subject,
        stream=JStream(stream.name, declare=False),
        durable=durable,
        config=work_consumer(
            durable, ack_wait_s=topology.ack_wait_s, max_deliver=topology.max_deliver
        ),
        inbox_prefix=topology.pull_inbox,
        pull_sub=PullSub(batch_size=fetch_batch, timeout=1.0),
        ack_policy=AckPolicy.MANUAL,
        # A stream message's headers are never an address to publish to: FastStream would
        # publish a handler's result to a ``reply_to`` header on the service's own connection.
        no_reply=True,
        title=title,
        description=description,
        max_workers=max_workers,
    )
    return subscribe
