"""Matching receipts (and dead letters) to the documents a client is waiting for."""

from __future__ import annotations

import asyncio
import contextlib

from kbus_contract import DeadLetter, DocumentIndexed
from kbus_contract.topology import Topology
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import DeliverPolicy
from pydantic import ValidationError

from kbus_client.errors import DocumentRejectedError

Key = tuple[str, str, str]


class ReceiptWatcher:
    """One reader of receipts and dead letters, shared by every waiting publish.

    Receipts and dead letters are read from their streams with ordered consumers, not from core
    NATS subscriptions: a reconnect or a slow moment in the client loses no receipt (the
    consumer resumes at the next stream sequence), so no publish waits for a receipt that went
    by unseen.
    """

    def __init__(self, nc: Client, topology: Topology) -> None:
        self._nc = nc
        self._topology = topology
        self._subs: list[Subscription] = []
        self._starting = asyncio.Lock()
        self._waiting: dict[Key, list[tuple[str, asyncio.Future[DocumentIndexed]]]] = {}

    async def start(self) -> None:
        async with self._starting:
            if self._subs:
                return
            js = self._nc.jetstream()
            t = self._topology
            readers = (
                (t.document_indexed, t.receipts_stream.name, self._on_indexed),
                (t.dead_letters, t.dead_letter_stream.name, self._on_dead_letter),
            )
            self._subs = [
                await js.subscribe(
                    subject,
                    stream=stream,
                    cb=callback,
                    ordered_consumer=True,
                    deliver_policy=DeliverPolicy.NEW,
                )
                for subject, stream, callback in readers
            ]

    async def stop(self) -> None:
        for sub in self._subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        self._subs = []

    def expect(self, key: Key, version: str) -> asyncio.Future[DocumentIndexed]:
        """A future that resolves with the receipt of this version of a document."""
        future: asyncio.Future[DocumentIndexed] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append((version, future))
        return future

    def forget(self, key: Key, future: asyncio.Future[DocumentIndexed]) -> None:
        entries = [e for e in self._waiting.get(key, []) if e[1] is not future]
        if entries:
            self._waiting[key] = entries
        else:
            self._waiting.pop(key, None)

    async def _on_indexed(self, msg: Msg) -> None:
        try:
            receipt = DocumentIndexed.model_validate_json(msg.data)
        except ValidationError:
            return
        key = (receipt.tenant, receipt.library, receipt.document_id)
        for version, future in self._waiting.get(key, []):
            if version == receipt.version and not future.done():
                future.set_result(receipt)

    async def _on_dead_letter(self, msg: Msg) -> None:
        try:
            letter = DeadLetter.model_validate_json(msg.data)
        except ValidationError:
            return
        if not (letter.tenant and letter.library and letter.document_id):
            return
        for _, future in self._waiting.get((letter.tenant, letter.library, letter.document_id), []):
            if not future.done():
                future.set_exception(
                    DocumentRejectedError(letter.reason, code=letter.code, stage=letter.stage)
                )
