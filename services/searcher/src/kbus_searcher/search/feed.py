"""``kb.feed``: a tenant's stored receipts and dead letters, read for it.

A tenant's credential holds no JetStream API (docs/security.md), so it cannot open a consumer
on kbus's streams; the searcher reads them for it, on the subject whose tenant and grant NATS
let the request through, and only the subjects of that tenant's granted libraries; those of
restricted documents only on the feed's form for them (``kb.feed.{tenant}.{grant}.restricted``,
which only a credential that may write, or act for anyone, may ask on).
"""

from __future__ import annotations

import json

from kbus_contract import ErrorReply, FeedEntry, FeedKind, FeedReply, FeedRequest
from kbus_contract.errors import ErrorCode, TransientError
from kbus_contract.tenancy import Identity
from kbus_runtime.answering import Inbound
from kbus_runtime.stage import Stage
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js.errors import APIError

from kbus_searcher.search.readers import scope_of
from kbus_searcher.state.records import read_records

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
        nc = self.stage.broker.connection
        messages, pending = await read_records(
            nc, stream, subjects, req.limit, after=req.after, since=req.since
        )
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
