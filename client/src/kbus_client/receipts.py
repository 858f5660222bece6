"""Matching receipts (and dead letters) to the documents a client is waiting for."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from kbus_contract import DeadLetter, DocumentDeleted, DocumentIndexed, DocumentRemoved
from kbus_contract.topology import Topology
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from pydantic import ValidationError

from kbus_client.errors import DocumentRejectedError

Key = tuple[str, str, str]
#: Seconds before a receipt the client did not acknowledge is delivered again.
ACK_WAIT_S = 10.0
#: Seconds a reader outlives the client that made it (the server removes it after).
INACTIVE_S = 300.0


@contextlib.asynccontextmanager
async def removal_of(
    nc: Client, subject: str, deletion: DocumentDeleted, *, listen: bool
) -> AsyncIterator[asyncio.Future[DocumentRemoved]]:
    """The receipt of a deletion, listened for on ``subject`` (from before the deletion is
    published, so it cannot go by unseen) while the block runs; ``listen=False`` listens to
    nothing."""
    done: asyncio.Future[DocumentRemoved] = asyncio.get_running_loop().create_future()
    wanted = (deletion.tenant, deletion.library, deletion.document_id)

    async def on_removed(msg: Msg) -> None:
        receipt = DocumentRemoved.model_validate_json(msg.data)
        same = (receipt.tenant, receipt.library, receipt.document_id) == wanted
        if same and not done.done():
            done.set_result(receipt)

    sub = await nc.subscribe(subject, cb=on_removed) if listen else None
    try:
        yield done
    finally:
        if sub is not None:
            await sub.unsubscribe()


class ReceiptWatcher:
    """One reader of receipts and dead letters per tenant, shared by every waiting publish.

    Each reader is a consumer of its stream filtered to the tenant's subjects (or to each
    granted library's), so a credential reads only its own; it is created by name with the
    filter in the request's subject, which is what NATS permissions can hold a credential to.
    Receipts are acknowledged one by one: one missed in a reconnect is delivered again, so no
    publish waits for a receipt that went by unseen.
    """

    def __init__(self, nc: Client, topology: Topology, granted: Sequence[str] | None) -> None:
        self._nc = nc
        self._topology = topology
        self._granted = granted
        self._subs: dict[str, list[Subscription]] = {}
        self._starting = asyncio.Lock()
        self._waiting: dict[Key, list[tuple[str | None, asyncio.Future[DocumentIndexed]]]] = {}

    async def start(self, tenant: str) -> None:
        """Read the receipts and dead letters of ``tenant`` (once)."""
        async with self._starting:
            if tenant in self._subs:
                return
            t = self._topology
            libraries: Sequence[str | None] = self._granted or [None]
            subs = []
            for library in libraries:
                subs.append(
                    await self._read(
                        t.indexed_of(tenant, library), t.receipts_stream.name, self._on_indexed
                    )
                )
                subs.append(
                    await self._read(
                        t.dead_letters_of(tenant, library),
                        t.dead_letter_stream.name,
                        self._on_dead_letter,
                    )
                )
            self._subs[tenant] = subs

    async def _read(
        self, subject: str, stream: str, callback: Callable[[Msg], Awaitable[None]]
    ) -> Subscription:
        js = self._nc.jetstream()
        config = ConsumerConfig(
            name=f"kbus-client-{self._nc.new_inbox().rsplit('.', 1)[-1]}",
            deliver_policy=DeliverPolicy.NEW,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ACK_WAIT_S,
            inactive_threshold=INACTIVE_S,
        )
        return await js.subscribe(
            subject, stream=stream, config=config, cb=callback, manual_ack=True
        )

    async def stop(self) -> None:
        for subs in self._subs.values():
            for sub in subs:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
        self._subs = {}

    def expect(self, key: Key, version: str | None) -> asyncio.Future[DocumentIndexed]:
        """A future that resolves with the receipt of this version of a document (of any
        version: a fetched page's comes from what the ingestor found)."""
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
        await _ack(msg)
        try:
            receipt = DocumentIndexed.model_validate_json(msg.data)
        except ValidationError:
            return
        key = (receipt.tenant, receipt.library, receipt.document_id)
        for version, future in self._waiting.get(key, []):
            if version in (None, receipt.version) and not future.done():
                future.set_result(receipt)

    async def _on_dead_letter(self, msg: Msg) -> None:
        await _ack(msg)
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


async def _ack(msg: Msg) -> None:
    with contextlib.suppress(Exception):
        await msg.ack()
