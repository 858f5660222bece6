"""A handler gets the message it handles without a hand-off to a worker thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio.to_thread
import pytest
from faststream import AckPolicy
from faststream.nats.annotations import NatsMessage
from kbus_runtime.bus import BusMessage, make_broker
from kbus_runtime.settings import BusSettings
from nats.aio.client import Client
from prometheus_client import CollectorRegistry

from tests.helpers import request_when_served


@pytest.mark.parametrize(
    ("annotation", "hand_offs"),
    # FastStream's own annotation is the contrast: it shows that the count sees a hand-off.
    [(BusMessage, 0), (NatsMessage, 1)],
    ids=["BusMessage", "faststream-NatsMessage"],
)
async def test_the_message_resolves_on_the_event_loop(
    bus: BusSettings,
    nc: Client,
    monkeypatch: pytest.MonkeyPatch,
    annotation: Any,
    hand_offs: int,
) -> None:
    threaded: list[Callable[..., Any]] = []
    run_sync = anyio.to_thread.run_sync

    async def counting(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        threaded.append(func)
        return await run_sync(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    broker = make_broker(bus, CollectorRegistry(), "test")
    subject = f"{bus.bus_prefix}.echo"
    seen: list[tuple[bytes, str | None]] = []

    async def echo(message: Any) -> str:
        seen.append((message.body, message.headers.get("n")))
        return "ok"

    echo.__annotations__["message"] = annotation
    broker.subscriber(subject, ack_policy=AckPolicy.MANUAL)(echo)
    async with broker:
        await broker.start()
        replies = [
            await request_when_served(nc, subject, f"body {i}".encode(), headers={"n": str(i)})
            for i in range(3)
        ]

    assert [r.data for r in replies] == [b"ok"] * 3
    assert seen == [(f"body {i}".encode(), str(i)) for i in range(3)]
    assert len(threaded) == 3 * hand_offs, threaded
