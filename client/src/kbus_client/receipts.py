"""Matching receipts (and dead letters) to the documents a client is waiting for."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from kbus_contract import (
    DeadLetter,
    DocumentAdded,
    DocumentDeleted,
    DocumentIndexed,
    DocumentProgress,
    DocumentRemoved,
    FeedKind,
    FeedReply,
    FeedRequest,
)
from kbus_contract.topology import Topology
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from pydantic import ValidationError

from kbus_client.errors import DocumentRejectedError

Key = tuple[str, str, str]
#: Asks kb.feed (the client's request, on its tenant's and grant's subject).
AskFeed = Callable[[FeedRequest], Awaitable[FeedReply]]
#: Seconds between checks, while waiting, that the connection did not drop (and a receipt with
#: it).
CHECK_EVERY_S = 2.0
#: How far before a wait began the stored receipts are read (clocks differ).
_SLACK = timedelta(seconds=5)


@contextlib.asynccontextmanager
async def removal_of(
    nc: Client, topology: Topology, deletion: DocumentDeleted, *, listen: bool
) -> AsyncIterator[asyncio.Future[DocumentRemoved]]:
    """The receipt of a deletion, listened for (from before the deletion is published, so it
    cannot go by unseen) while the block runs; ``listen=False`` listens to nothing. A document's
    removal may come on the form for restricted documents, which its publisher holds."""
    done: asyncio.Future[DocumentRemoved] = asyncio.get_running_loop().create_future()
    wanted = (deletion.tenant, deletion.library, deletion.document_id)

    async def on_removed(msg: Msg) -> None:
        receipt = DocumentRemoved.model_validate_json(msg.data)
        same = (receipt.tenant, receipt.library, receipt.document_id) == wanted
        if same and not done.done():
            done.set_result(receipt)

    forms = (False, True) if deletion.document_id is not None else (False,)
    subjects = [topology.removed(deletion.tenant, deletion.library, r) for r in forms]
    subs = [await nc.subscribe(s, cb=on_removed) for s in subjects] if listen else []
    try:
        yield done
    finally:
        for sub in subs:
            await sub.unsubscribe()


@dataclass
class Waiting:
    """One publish waiting for its receipt."""

    key: Key
    version: str | None
    since: datetime = field(default_factory=lambda: datetime.now(UTC))
    #: When the wait began or its document last showed progress (a part of it stored).
    progressed: float = field(default_factory=time.monotonic)
    future: asyncio.Future[DocumentIndexed] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def settle(self, receipt: DocumentIndexed) -> None:
        if self.version in (None, receipt.version) and not self.future.done():
            self.future.set_result(receipt)

    def progress(self, told: DocumentProgress) -> None:
        if self.version in (None, told.version):
            self.progressed = time.monotonic()

    def reject(self, letter: DeadLetter) -> None:
        if not self.future.done():
            self.future.set_exception(
                DocumentRejectedError(letter.reason, code=letter.code, stage=letter.stage)
            )


class ReceiptWatcher:
    """Listens to a tenant's receipts, dead letters and large documents' progress, shared by
    every waiting publish.

    A credential listens on its own subjects only (each granted library's, with their forms
    for restricted documents, which a publisher's credential holds), which is all its account
    imports. What went by while the connection was down is read back from kbus's store
    (``kb.feed``) once it is up again, and once more before a wait gives up, so no publish waits
    for a receipt that was sent while no one listened.
    """

    def __init__(
        self, nc: Client, topology: Topology, granted: Sequence[str] | None, ask: AskFeed
    ) -> None:
        self._nc = nc
        self._topology = topology
        self._granted = granted
        self._ask = ask
        self._subs: dict[str, list[Subscription]] = {}
        self._starting = asyncio.Lock()
        self._waiting: dict[Key, list[Waiting]] = {}

    async def start(self, tenant: str) -> None:
        """Listen to the receipts and dead letters of ``tenant`` (once)."""
        async with self._starting:
            if tenant in self._subs:
                return
            t = self._topology
            subs = []
            libraries: Sequence[str | None] = self._granted or [None]
            for library in libraries:
                for restricted in (False, True):
                    indexed = t.indexed_of(tenant, library, restricted)
                    letters = t.dead_letters_of(tenant, library, restricted)
                    progress = t.progress(tenant, library or "*", restricted)
                    subs.append(await self._nc.subscribe(indexed, cb=self._on_indexed))
                    subs.append(await self._nc.subscribe(letters, cb=self._on_dead_letter))
                    subs.append(await self._nc.subscribe(progress, cb=self._on_progress))
            await self._nc.flush()  # listening before anything is published
            self._subs[tenant] = subs

    async def stop(self) -> None:
        for subs in self._subs.values():
            for sub in subs:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
        self._subs = {}

    async def expect_receipt(self, doc: DocumentAdded) -> Waiting:
        """A wait for the receipt of this version of a document (of any version: a fetched
        page's comes from what the ingestor found), listening from now on."""
        await self.start(doc.tenant)
        key = (doc.tenant, doc.library, doc.document_id)
        waiting = Waiting(key, None if doc.url else doc.effective_version())
        self._waiting.setdefault(key, []).append(waiting)
        return waiting

    def forget(self, waiting: Waiting) -> None:
        entries = [e for e in self._waiting.get(waiting.key, []) if e is not waiting]
        if entries:
            self._waiting[waiting.key] = entries
        else:
            self._waiting.pop(waiting.key, None)

    async def wait(self, waiting: Waiting, timeout_s: float) -> DocumentIndexed:
        """The receipt, or DocumentRejectedError, or TimeoutError after ``timeout_s`` without
        a sign of progress (each stored part of a large document is one: a document that keeps
        progressing is waited for however long it takes)."""
        reconnects = self._reconnects()
        while not waiting.future.done():
            left = waiting.progressed + timeout_s - time.monotonic()
            if left <= 0:
                await self._catch_up(waiting)
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(waiting.future), min(left, CHECK_EVERY_S))
            if self._reconnects() != reconnects and self._nc.is_connected:
                reconnects = self._reconnects()
                await self._catch_up(waiting)
        if not waiting.future.done():
            raise TimeoutError(
                f"no receipt for {waiting.key}, and no progress for {timeout_s:.0f} s"
            )
        return waiting.future.result()

    def _reconnects(self) -> int:
        return int(self._nc.stats.get("reconnects", 0))

    async def _catch_up(self, waiting: Waiting) -> None:
        """Read what kbus stored for this document since the wait began."""
        tenant, library, _ = waiting.key
        for kind in (FeedKind.RECEIPTS, FeedKind.DEAD_LETTERS):
            after = 0
            while not waiting.future.done():
                reply = await self._ask(
                    FeedRequest(
                        tenant=tenant,
                        kind=kind,
                        library=library,
                        after=after,
                        since=None if after else waiting.since - _SLACK,
                        limit=500,
                    )
                )
                for entry in reply.entries:
                    self._dispatch(entry.channel, entry.message)
                if not reply.more:
                    break
                after = reply.last

    async def _on_indexed(self, msg: Msg) -> None:
        self._dispatch("document.indexed", msg.data)

    async def _on_progress(self, msg: Msg) -> None:
        with contextlib.suppress(ValidationError):
            told = DocumentProgress.model_validate_json(msg.data)
            for waiting in self._waiting.get((told.tenant, told.library, told.document_id), []):
                waiting.progress(told)

    async def _on_dead_letter(self, msg: Msg) -> None:
        self._dispatch("deadletter", msg.data)

    def _dispatch(self, channel: str, body: bytes | dict[str, Any]) -> None:
        """Settle the waits a stored or live receipt (or dead letter) is for."""
        try:
            if channel == "deadletter":
                letter = DeadLetter.model_validate(_parsed(body))
                if letter.tenant and letter.library and letter.document_id:
                    key = (letter.tenant, letter.library, letter.document_id)
                    for waiting in self._waiting.get(key, []):
                        waiting.reject(letter)
            elif channel == "document.indexed":
                receipt = DocumentIndexed.model_validate(_parsed(body))
                key = (receipt.tenant, receipt.library, receipt.document_id)
                for waiting in self._waiting.get(key, []):
                    waiting.settle(receipt)
        except (ValidationError, ValueError):
            return


def _parsed(body: bytes | dict[str, Any]) -> Any:
    return json.loads(body) if isinstance(body, bytes) else body
