"""``kb.feed``: a tenant's stored receipts and dead letters, read for it.

A tenant's credential holds no JetStream API (docs/security.md), so it cannot open a consumer
on kbus's streams; the searcher reads them for it, on the subject whose tenant and grant NATS
let the request through, and only the subjects of that tenant's granted libraries; those of
restricted documents only on the feed's form for them (``kb.feed.{tenant}.{grant}.restricted``,
which only a credential that may write, or act for anyone, may ask on).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from datetime import UTC
from typing import Any

from kbus_contract import ErrorReply, FeedEntry, FeedKind, FeedReply, FeedRequest
from kbus_contract.errors import ErrorCode, TransientError
from kbus_contract.tenancy import Identity
from kbus_runtime.answering import Inbound
from kbus_runtime.stage import Stage
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js.errors import APIError

from kbus_searcher.search.readers import scope_of

#: Seconds the searcher waits for the server to hand over the entries it counted.
_FETCH_TIMEOUT_S = 5.0
#: Seconds after which the server removes a reader's consumer a crash left behind.
_IDLE_S = 10.0
_RECEIPTS = ("document.indexed", "document.removed", "document.failed")


class Feed:
    """Reads a tenant's receipts and dead letters from their streams."""

    def __init__(self, stage: Stage) -> None:
        self.stage = stage

    async def answer(self, inbound: Inbound) -> FeedReply | ErrorReply:
        """Answer one ``kb.feed.{tenant}.{grant}`` request."""
        sent = self.stage.topology.identity(inbound.subject)
        return await self.stage.answer(
            inbound.body, FeedRequest, lambda req: self.read(req, sent), sent.tenant
        )

    async def read(self, req: FeedRequest, sent: Identity) -> FeedReply:
        """The entries of the request's tenant and libraries, oldest first."""
        scope_of(sent, req.tenant, None if req.library is None else (req.library,))
        stream, subjects = self._where(req, sent)
        try:
            return await self._read(req, stream, subjects)
        except (APIError, NatsError, TimeoutError) as exc:
            raise TransientError(
                f"the feed could not be read: {exc}", code=ErrorCode.BUS_ERROR
            ) from exc

    def _where(self, req: FeedRequest, sent: Identity) -> tuple[str, list[str]]:
        """The stream and the filter subjects of what the request may read: those naming
        restricted documents only when it came on the feed's form for them."""
        t = self.stage.topology
        granted = sorted(sent.libraries() or ())
        libraries: list[str] = [req.library] if req.library else granted or ["*"]
        forms = (False, True) if sent.restricted else (False,)
        if req.kind is FeedKind.DEAD_LETTERS:
            letters = [t.dead_letters_of(req.tenant, x, r) for x in libraries for r in forms]
            return t.dead_letter_stream.name, letters
        subjects = [
            t.subject(name, restricted, tenant=req.tenant, library=library)
            for library in libraries
            for name in _RECEIPTS
            for restricted in forms
        ]
        if libraries == ["*"]:
            subjects.append(t.removed(req.tenant))  # a whole tenant's deletion
        return t.receipts_stream.name, subjects

    async def _read(self, req: FeedRequest, stream: str, subjects: list[str]) -> FeedReply:
        """Read through a consumer of its own, made and removed here whatever happens (the
        server removes one a crash leaves after a few seconds). The JetStream API is asked
        directly: nats-py cannot read back a start time of whole seconds."""
        nc = self.stage.broker.connection
        name = f"feed_{uuid.uuid4().hex}"
        config = {
            "name": name,
            "filter_subjects": subjects,
            "ack_policy": "none",
            "inactive_threshold": int(_IDLE_S * 1e9),
            "num_replicas": 1,
            "mem_storage": True,
            **_start(req),
        }
        created = await _api(
            nc,
            f"$JS.API.CONSUMER.CREATE.{stream}.{name}",
            {"stream_name": stream, "config": config},
        )
        try:
            pending = int(created.get("num_pending") or 0)
            wanted = min(req.limit, pending)
            messages = await _fetch(nc, stream, name, wanted) if wanted else []
        finally:
            with contextlib.suppress(Exception):
                await nc.request(f"$JS.API.CONSUMER.DELETE.{stream}.{name}", b"", timeout=2.0)
        entries = tuple(self._entry(m) for m in messages)
        last = entries[-1].sequence if entries else req.after
        return FeedReply(tenant=req.tenant, entries=entries, last=last, more=pending > len(entries))

    def _entry(self, msg: Msg) -> FeedEntry:
        meta = msg.metadata
        return FeedEntry(
            sequence=meta.sequence.stream,
            time=meta.timestamp,
            subject=msg.subject,
            channel=self.stage.topology.channel_of(msg.subject),
            message=json.loads(msg.data),
        )


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


def _start(req: FeedRequest) -> dict[str, Any]:
    """Where the reading starts: after a sequence, or at a time (RFC 3339, as the server
    reads it)."""
    if req.after or req.since is None:
        return {"deliver_policy": "by_start_sequence", "opt_start_seq": req.after + 1}
    since = req.since if req.since.tzinfo else req.since.replace(tzinfo=UTC)
    stamp = since.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return {"deliver_policy": "by_start_time", "opt_start_time": stamp}
