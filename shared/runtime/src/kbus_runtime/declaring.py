"""Streams and key-value buckets on the server, as the topology declares them.

Services create or update them at start where they may (``KBUS_DECLARE_STREAMS``); where a
set-up job owns them, services only check that they exist with the settings that protect data.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from dataclasses import replace

from kbus_contract.backlog import lane_consumers
from kbus_contract.storage import LANE_IDLE_S
from kbus_contract.topology import StageConsumer, Stream, Topology
from kbus_contract.wire import until_acknowledged
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StreamConfig, StreamInfo
from nats.js.errors import APIError, NotFoundError
from nats.js.kv import KeyValue

log = logging.getLogger("kbus")

STREAM_NAME_IN_USE = 10058
#: Seconds a service starting asks the JetStream API again while it does not answer.
START_BOUND_S = 60.0
#: Seconds a stream just declared may not be found (a cluster forming its replicas): in one
#: cluster start a gateway declared a stream and found it missing at once.
DECLARED_PATIENCE_S = 15.0


async def declare_streams(js: JetStreamContext, topology: Topology) -> None:
    """Create or update every stream, then check that the server holds them as kbus needs.

    Where services may not manage streams (``declare_streams`` off), only check: every stream
    must exist with the settings that protect data, and what is wrong is said by name.
    """
    await _require_jetstream(js)
    if topology.declare:
        for stream in topology.streams:
            # A cluster placing a stream of three replicas may answer after the API's timeout
            # (the stream may then exist): asking again is safe, as declaring is idempotent.
            await until_acknowledged(functools.partial(_declare, js, stream), bound_s=START_BOUND_S)
    await check_streams(js, topology)


async def _declare(js: JetStreamContext, stream: Stream) -> None:
    try:
        await js.stream_info(stream.name)
    except NotFoundError:
        try:
            await js.add_stream(stream.config)
            log.info("declared stream %s", stream.name)
            return
        except APIError as exc:
            if exc.err_code != STREAM_NAME_IN_USE:  # another service created it just now
                raise
    try:
        await js.update_stream(stream.config)
    except APIError as exc:
        raise RuntimeError(
            f"stream {stream.name} exists with settings that cannot be changed to what "
            f"kbus needs ({exc.description}); move its messages and recreate it"
        ) from exc


async def _require_jetstream(js: JetStreamContext) -> None:
    deadline = time.monotonic() + START_BOUND_S
    while True:
        try:
            await js.account_info()
            return
        except NatsTimeoutError:
            # The meta leader is being elected (a server just lost): ask again.
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1.0)
        except Exception as exc:
            raise RuntimeError(
                f"JetStream is not available on this NATS server ({exc}): start nats-server "
                "with JetStream on (-js, or a jetstream block in its configuration)"
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
    missing: list[str] = []
    wrong: list[str] = []
    # A stream this process (or another replica) has just made may not be found for a moment
    # on a cluster, while its replicas form: found or not, it is asked again meanwhile.
    patience_s = DECLARED_PATIENCE_S if topology.declare else 0.0
    for stream in topology.streams:
        try:
            info = await _stream_info(js, stream.name, patience_s)
        except NotFoundError:
            missing.append(stream.name)
            continue
        problems = config_problems(info.config, stream.config)
        wrong.extend(f"{stream.name}: {problem}" for problem in problems)
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


async def _stream_info(js: JetStreamContext, name: str, patience_s: float) -> StreamInfo:
    """The stream's info; a stream whose leader was just lost answers after its next election,
    and one not found is asked again for ``patience_s``."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            return await until_acknowledged(
                functools.partial(js.stream_info, name), bound_s=START_BOUND_S
            )
        except NotFoundError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def open_bucket(js: JetStreamContext, config: KeyValueConfig, *, create: bool) -> KeyValue:
    """A key-value bucket, declared (created, or its limits set to the configured ones) where
    services may, as streams are."""
    if not create:
        return await js.key_value(config.bucket)
    try:
        return await js.create_key_value(config)
    except APIError as exc:
        if exc.err_code != STREAM_NAME_IN_USE:
            raise
    # The bucket exists with other limits (a setting changed): apply this configuration's.
    stream = (await js.stream_info(f"KV_{config.bucket}")).config
    wanted = replace(
        stream,
        description=config.description,
        max_bytes=config.max_bytes,
        allow_direct=config.direct,
        max_age=config.ttl or stream.max_age,
    )
    if wanted != stream:
        log.info("bucket %s: applying the configured limits", config.bucket)
        await js.update_stream(wanted)
    return await js.key_value(config.bucket)


async def consumers_answer(js: JetStreamContext, consumers: list[tuple[str, str]]) -> None:
    """Wait until each (stream, durable) consumer's leader answers (or it does not exist yet):
    FastStream asks for each consumer once as it starts, and a service whose start-up meets a
    consumer between leaders would exit."""
    for stream, durable in consumers:
        with contextlib.suppress(NotFoundError):
            await until_acknowledged(
                functools.partial(js.consumer_info, stream, durable), bound_s=START_BOUND_S
            )


async def one_kind_of_consumer(
    js: JetStreamContext, stages: list[StageConsumer], *, fair: bool
) -> None:
    """A work queue lets one consumer take each subject: a fair stage's tenants' lanes, or its
    durable, never both. Fair share on: a durable left from before is removed (what it held
    stays in the stream, for the lanes). Off: lanes left from before are named, with what to do.
    """
    for stage in stages:
        if fair:
            with contextlib.suppress(NotFoundError):
                await js.delete_consumer(stage.stream, stage.durable)
                log.warning("%s: removed its durable consumer: fair share is on", stage.stage)
            continue
        if lanes := await lane_consumers(js, stage):
            names = ", ".join(sorted(c.name or "" for c in lanes)[:5])
            raise RuntimeError(
                f"{stage.stage}: fair share is off, but consumers of tenants' lanes exist "
                f"({names}, {len(lanes)} in all) and block its durable consumer: delete them "
                f"(nats consumer rm {stage.stream} NAME), or wait until the server removes "
                f"each, {LANE_IDLE_S / 60:.0f} minutes after its last use"
            )
