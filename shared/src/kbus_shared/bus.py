"""Bus wiring every service shares: the broker, stream declaration, requests and the ASGI app."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Annotated, Any, TypeVar

import nats
from faststream import AckPolicy
from faststream._internal.context import Context
from faststream.asgi import AsgiFastStream, make_ping_asgi
from faststream.nats import JStream, NatsBroker, PullSub
from faststream.nats.message import NatsMessage
from faststream.nats.prometheus import NatsPrometheusMiddleware
from faststream.security import SASLPlaintext
from nats.aio.client import Client
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StreamConfig
from nats.js.errors import APIError, NotFoundError
from nats.js.kv import KeyValue
from prometheus_client import CollectorRegistry, make_asgi_app
from pydantic import BaseModel

from kbus_shared.answering import Served
from kbus_shared.consuming import parse_reply
from kbus_shared.errors import TransientError
from kbus_shared.settings import BusSettings
from kbus_shared.topology import Topology, work_consumer

M = TypeVar("M", bound=BaseModel)

log = logging.getLogger("kbus")

JSON_HEADERS = {"content-type": "application/json"}


class _LoopContext(Context):
    """FastStream's context field, resolved on the event loop.

    fast_depends resolves a field with a synchronous ``use`` through anyio's ``to_thread``: a
    hand-off to a worker thread and back for every message, for what is a dictionary lookup.
    An ``async`` ``use`` is awaited in place (side by side, a request-reply round trip took
    0.3 to 0.8 ms less; docs/performance.md).
    """

    async def use(self, /, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        return super().use(**kwargs)


#: The handler parameter for the message being handled (FastStream's ``NatsMessage``
#: annotation, without the thread hand-off).
BusMessage = Annotated[NatsMessage, _LoopContext("message")]


def make_broker(
    settings: BusSettings, registry: CollectorRegistry, app_name: str, log_level: str = "INFO"
) -> NatsBroker:
    """A NATS broker with Prometheus metrics; it connects when the app starts.

    Args:
        log_level: The service's log level; FastStream's line per message shows at DEBUG.
    """
    security = None
    if settings.nats_user:
        password = settings.nats_password.get_secret_value() if settings.nats_password else ""
        security = SASLPlaintext(username=settings.nats_user, password=password)
    broker = NatsBroker(
        settings.nats_url,
        security=security,
        name=f"kbus-{app_name}",
        inbox_prefix=settings.inbox_prefix,
        middlewares=[NatsPrometheusMiddleware(registry=registry, app_name=app_name)],
        # FastStream's "Received"/"Processed" lines: two per message and stage at INFO were most
        # of the services' logs and about 3% of a stage's busy time.
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
    options: dict[str, Any] = {"inbox_prefix": bus.inbox_prefix}
    if bus.nats_user:
        options["user"] = bus.nats_user
        options["password"] = bus.nats_password.get_secret_value() if bus.nats_password else ""
    return await nats.connect(bus.nats_url, **options)


async def declare_streams(js: JetStreamContext, topology: Topology) -> None:
    """Create or update every stream, then check that the server holds them as kbus needs.

    Where services may not manage streams (``declare_streams`` off), only check: every stream
    must exist with the settings that protect data, and what is wrong is said by name.
    """
    await _require_jetstream(js)
    if topology.declare:
        for stream in topology.streams:
            config = desired_config(stream)
            try:
                await js.stream_info(stream.name)
            except NotFoundError:
                await js.add_stream(config)
                log.info("declared stream %s", stream.name)
                continue
            try:
                await js.update_stream(config)
            except APIError as exc:
                raise RuntimeError(
                    f"stream {stream.name} exists with settings that cannot be changed to what "
                    f"kbus needs ({exc.description}); move its messages and recreate it"
                ) from exc
    await check_streams(js, topology)


def desired_config(stream: JStream) -> StreamConfig:
    """A stream's full configuration (JStream keeps the subjects apart until FastStream runs)."""
    return replace(stream.config, subjects=list(stream.subjects))


async def _require_jetstream(js: JetStreamContext) -> None:
    try:
        await js.account_info()
    except Exception as exc:
        raise RuntimeError(
            f"JetStream is not available on this NATS server ({exc}): start nats-server with "
            "JetStream on (-js, or a jetstream block in its configuration)"
        ) from exc


def config_problems(have: StreamConfig, want: StreamConfig) -> list[str]:
    """How a stream on the server differs from what kbus needs, in words."""
    problems = []
    for field in ("storage", "retention", "discard", "num_replicas"):
        now, needed = _plain(getattr(have, field)), _plain(getattr(want, field))
        if now != needed:
            problems.append(f"{field} is {now}, kbus needs {needed}")
    missing = set(want.subjects or ()) - set(have.subjects or ())
    if missing:
        problems.append("it does not capture " + ", ".join(sorted(missing)))
    if want.duplicate_window and (have.duplicate_window or 0) < want.duplicate_window:
        problems.append(
            f"its duplicate window is {have.duplicate_window}s, kbus needs "
            f"{want.duplicate_window}s (duplicate publishes would be indexed twice)"
        )
    return problems


def _plain(value: object) -> object:
    return getattr(value, "value", value)


async def check_streams(js: JetStreamContext, topology: Topology) -> None:
    """Fail with a clear message unless every stream exists with the settings kbus needs."""
    missing, wrong = [], []
    for stream in topology.streams:
        try:
            info = await js.stream_info(stream.name)
        except NotFoundError:
            missing.append(stream.name)
            continue
        for problem in config_problems(info.config, desired_config(stream)):
            wrong.append(f"{stream.name}: {problem}")
    faults = []
    if wrong:
        faults.append("streams not configured as kbus needs: " + "; ".join(wrong))
    if missing:
        faults.append(
            "streams missing: " + ", ".join(missing) + " (run the setup job, "
            "or start a service with KBUS_DECLARE_STREAMS=true)"
        )
    if faults:
        raise RuntimeError(". ".join(faults))


def make_app(
    broker: NatsBroker,
    registry: CollectorRegistry,
    lifespan: Any,
    extra_routes: Sequence[tuple[str, Any]] = (),
    served: list[Served] | None = None,
) -> AsgiFastStream:
    """The service as an ASGI app: the broker, ``/health`` and ``/metrics``.

    ``served``: the micro services the lifespan starts; shutdown stops them.
    """
    app = AsgiFastStream(
        broker,
        asgi_routes=[
            ("/health", make_ping_asgi(broker, timeout=2.0, include_in_schema=False)),
            ("/metrics", make_asgi_app(registry)),
            *extra_routes,
        ],
        lifespan=lifespan,
    )
    if served is not None:

        @app.on_shutdown
        async def stop_serving() -> None:
            # Before the broker drains its connection: stop answering, then finish what runs.
            while served:
                await served.pop().stop()

    return app


async def request(
    broker: NatsBroker,
    payload: BaseModel,
    subject: str,
    reply_model: type[M],
    *,
    stage: str,
    timeout_s: float,
) -> M:
    """Send a request and parse its reply; silence and error replies become typed errors.

    The request goes through the broker's NATS connection directly (requests are served as
    micro services, not FastStream subscribers), without headers: nats-py parses any header
    block with the email package on every message.
    """
    try:
        response = await broker.connection.request(
            subject, payload.model_dump_json().encode(), timeout=timeout_s
        )
    except NoRespondersError as exc:
        raise TransientError(f"no {stage} is running", code=f"{stage}_unavailable") from exc
    except (NatsTimeoutError, TimeoutError) as exc:
        raise TransientError(
            f"{stage} did not answer within {timeout_s:.1f}s", code=f"{stage}_timeout"
        ) from exc
    return parse_reply(response.data, reply_model, stage)


STREAM_NAME_IN_USE = 10058


async def open_bucket(js: JetStreamContext, config: KeyValueConfig, *, create: bool) -> KeyValue:
    """A key-value bucket, created (or its configuration updated) where services may."""
    if not create:
        return await js.key_value(config.bucket)
    try:
        return await js.create_key_value(config)
    except APIError as exc:
        if exc.err_code != STREAM_NAME_IN_USE:
            raise
    # An earlier kbus created the bucket with other limits: bring them up to date, keep the data.
    stream = (await js.stream_info(f"KV_{config.bucket}")).config
    wanted = replace(
        stream,
        description=config.description,
        max_msgs_per_subject=config.history,
        max_bytes=stream.max_bytes if config.max_bytes is None else config.max_bytes,
        max_age=stream.max_age if config.ttl is None else config.ttl,
        max_msg_size=stream.max_msg_size
        if config.max_value_size is None
        else config.max_value_size,
        allow_direct=stream.allow_direct if config.direct is None else config.direct,
    )
    if wanted != stream:
        log.warning("bucket %s: updating its limits to this version's", config.bucket)
        await js.update_stream(wanted)
    return await js.key_value(config.bucket)


async def connect_and_declare(broker: NatsBroker, topology: Topology) -> None:
    """Connect (before the subscribers start) and make sure every stream exists."""
    await broker.connect()
    await declare_streams(broker.connection.jetstream(), topology)


def work_subscriber(
    broker: NatsBroker,
    topology: Topology,
    subject: str,
    stream: JStream,
    durable: str,
    *,
    title: str,
    description: str,
    max_workers: int = 1,
    fetch_batch: int = 1,
) -> Callable[[Callable[[NatsMessage], Awaitable[None]]], Any]:
    """The subscription of a pipeline stage: its shared durable pull consumer, acked by hand.

    FastStream's default for JetStream handlers terminates a message on any exception;
    :meth:`kbus_shared.consuming.Stage.settle` decides every ack instead. With ``max_workers``
    above one, that many messages are handled at once.

    Messages are fetched ``fetch_batch`` at a time, one by default (concurrency comes from
    ``max_workers``): on an idle consumer nats-py's fetch of more than one waits for the rest of
    the batch until its timeout, and a lone document took about 1 to 3 s from publish to receipt
    that way, about 0.2 s with single fetches. Single fetches cost more CPU per message under
    load (``bench.framework``; docs/performance.md).
    """
    subscribe: Callable[[Callable[[NatsMessage], Awaitable[None]]], Any] = broker.subscriber(
        subject,
        stream=stream,
        durable=durable,
        config=work_consumer(
            durable, ack_wait_s=topology.ack_wait_s, max_deliver=topology.max_deliver
        ),
        inbox_prefix=topology.pull_inbox,
        pull_sub=PullSub(batch_size=fetch_batch, timeout=1.0),
        ack_policy=AckPolicy.MANUAL,
        title=title,
        description=description,
        max_workers=max_workers,
    )
    return subscribe
