"""kbus's stored records (receipts and dead letters) read back from their streams: through a
consumer made for one read and removed after it (the server removes one a crash leaves)."""

from __future__ import annotations

import contextlib
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.errors import APIError

#: Seconds the searcher waits for the server to hand over the entries it counted.
_FETCH_TIMEOUT_S = 5.0
#: Seconds after which the server removes a reader's consumer a crash left behind.
_IDLE_S = 10.0


async def read_records(
    nc: Client,
    stream: str,
    subjects: list[str],
    limit: int,
    *,
    after: int = 0,
    since: datetime | None = None,
) -> tuple[list[Msg], int]:
    """Up to ``limit`` records of ``stream`` on ``subjects``, oldest first, stored after the
    sequence ``after`` (or at and after the time ``since``), and how many there were. The
    JetStream API is asked directly: nats-py cannot read back a start time of whole seconds.

    Raises:
        APIError, nats.errors.Error, TimeoutError: the stream could not be read.
    """
    name = f"records_{uuid.uuid4().hex}"
    config = {
        "name": name,
        "filter_subjects": subjects,
        "ack_policy": "none",
        "inactive_threshold": int(_IDLE_S * 1e9),
        "num_replicas": 1,
        "mem_storage": True,
        **_start(after, since),
    }
    created = await _api(
        nc, f"$JS.API.CONSUMER.CREATE.{stream}.{name}", {"stream_name": stream, "config": config}
    )
    try:
        pending = int(created.get("num_pending") or 0)
        wanted = min(limit, pending)
        return (await _fetch(nc, stream, name, wanted) if wanted else []), pending
    finally:
        with contextlib.suppress(Exception):
            await nc.request(f"$JS.API.CONSUMER.DELETE.{stream}.{name}", b"", timeout=2.0)


async def _api(nc: Client, subject: str, request: dict[str, Any]) -> dict[str, Any]:
    reply = await nc.request(subject, json.dumps(request).encode(), timeout=_FETCH_TIMEOUT_S)
    answer: dict[str, Any] = json.loads(reply.data)
    if "error" in answer:
        error = answer["error"]
        raise APIError(code=error.get("code"), description=error.get("description"))
    return answer


async def _fetch(nc: Client, stream: str, name: str, wanted: int) -> list[Msg]:
    """Up to ``wanted`` messages of a consumer, each as it is delivered."""
    inbox = await nc.subscribe(nc.new_inbox())
    try:
        request = {"batch": wanted, "expires": int(_FETCH_TIMEOUT_S * 1e9)}
        await nc.publish(
            f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}",
            json.dumps(request).encode(),
            reply=inbox.subject,
        )
        found: list[Msg] = []
        while len(found) < wanted:
            msg = await inbox.next_msg(timeout=_FETCH_TIMEOUT_S)
            if (msg.headers or {}).get("Status"):
                break  # the server has no more for this request
            found.append(msg)
        return found
    finally:
        await inbox.unsubscribe()


def _start(after: int, since: datetime | None) -> dict[str, Any]:
    """Where the reading starts: after a sequence, or at a time (RFC 3339, as the server
    reads it)."""
    if after or since is None:
        return {"deliver_policy": "by_start_sequence", "opt_start_seq": after + 1}
    since = since if since.tzinfo else since.replace(tzinfo=UTC)
    stamp = since.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return {"deliver_policy": "by_start_time", "opt_start_time": stamp}
