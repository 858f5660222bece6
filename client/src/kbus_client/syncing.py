"""Keeping a library in step with a source: publish what is new or changed, then the whole
list, so that what the source no longer holds is deleted (``document.synced``)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kbus_contract import (
    DocumentAdded,
    LibraryReconciled,
    LibrarySync,
    SyncEntry,
    VersionsReply,
    VersionsRequest,
)
from kbus_contract.claimcheck import body_ref
from kbus_contract.errors import PermanentError
from kbus_contract.syncing import MAX_INLINE_ENTRIES
from kbus_contract.wire import describe_validation_error
from nats.aio.msg import Msg
from pydantic import ValidationError

from kbus_client.bodies import STORED_MESSAGE_BYTES
from kbus_client.documents import DocumentWrites
from kbus_client.storing import until_stored

#: Seconds the client waits for the receipt beyond the sync's own settle time.
RECEIPT_SLACK_S = 60.0


@dataclass(frozen=True)
class SyncResult:
    """What a sync did (its receipt), and how many documents this client published for it."""

    receipt: LibraryReconciled
    published: int
    #: The documents this sync asked for: new, at a new version, and no longer listed.
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()


class LibrarySyncs(DocumentWrites):
    """The syncs of :class:`kbus_client.KbClient`."""

    async def versions(
        self, library: str, *, source: str | None = None, tenant: str | None = None
    ) -> dict[str, str]:
        """The indexed version of each document of a library (of one source), by id."""
        found: dict[str, str] = {}
        after: str | None = None
        while True:
            asked = VersionsRequest(
                tenant=self.tenant_for(tenant), library=library, source=source, after=after
            )
            page: VersionsReply = await self._ask("kb.versions", asked, VersionsReply)
            found.update((e.document_id, e.version) for e in page.documents)
            if page.after is None:
                return found
            after = page.after

    async def sync_library(
        self,
        library: str,
        documents: Iterable[Mapping[str, Any]],
        *,
        source: str | None = None,
        tenant: str | None = None,
        settle_s: float = 300.0,
        indexed: Mapping[str, str] | None = None,
    ) -> SyncResult:
        """Make ``library`` (or ``source``'s part of it) hold exactly ``documents``: each a
        mapping of :meth:`publish_document`'s arguments (``library`` and ``source`` are this
        call's). Publishes the list, then only the documents whose version is not indexed yet;
        kbus deletes what the list does not name, and the receipt says what the sync did.
        ``indexed``: what :meth:`versions` gave just before, if the caller read it already.

        Raises:
            ValueError: a document is invalid, or two have one id (nothing is sent).
            TimeoutError: no receipt within ``settle_s`` and a minute.
            PermanentError: kbus refused the sync (its ``code`` says why: past a budget, a
                list it could not read).
        """
        chosen = self.tenant_for(tenant)
        wanted = self._documents(documents, library, source, chosen)
        if indexed is None:
            indexed = await self.versions(library, source=source, tenant=chosen)
        changed = [
            (doc, data)
            for doc, data in wanted
            if indexed.get(doc.document_id) != doc.effective_version()
        ]
        entries = [
            SyncEntry(document_id=doc.document_id, version=doc.effective_version())
            for doc, _ in wanted
        ]
        async with self._receipt_of(chosen, library) as receipts:
            sync_id = await self.publish_sync(
                library, entries, source=source, tenant=chosen, settle_s=settle_s
            )
            # After the list: the sync waits for them, and nothing it deletes is one of them.
            for doc, data in changed:
                await self.publish(doc, data)
            receipt = await asyncio.wait_for(
                _receipt_of_sync(receipts, sync_id), settle_s + RECEIPT_SLACK_S
            )
        if receipt.refused is not None:
            code, _, reason = receipt.refused.partition(": ")
            raise PermanentError(reason or receipt.refused, code=code, stage="searcher")
        listed = {doc.document_id for doc, _ in wanted}
        return SyncResult(
            receipt,
            len(changed),
            added=tuple(d.document_id for d, _ in changed if d.document_id not in indexed),
            changed=tuple(d.document_id for d, _ in changed if d.document_id in indexed),
            deleted=tuple(sorted(set(indexed) - listed)),
        )

    async def publish_sync(
        self,
        library: str,
        entries: Iterable[SyncEntry],
        *,
        source: str | None = None,
        tenant: str | None = None,
        settle_s: float = 300.0,
    ) -> str:
        """Publish a sync's list as it is (the documents themselves are the caller's to
        publish) and return its ``sync_id``, which its receipt names."""
        chosen = self.tenant_for(tenant)
        sync = await self._sync_message(chosen, library, source, list(entries), settle_s)
        return await self._publish_sync(sync)

    def _documents(
        self, documents: Iterable[Mapping[str, Any]], library: str, source: str | None, tenant: str
    ) -> list[tuple[DocumentAdded, bytes | None]]:
        made: dict[str, tuple[DocumentAdded, bytes | None]] = {}
        for fields in documents:
            try:
                doc = self.new_document(
                    **{**fields, "library": library, "source": source, "tenant": tenant}
                )
            except (ValueError, TypeError) as exc:  # a field of the wrong shape: the caller's
                raise ValueError(f"{fields.get('document_id')}: {exc}") from exc
            if doc.document_id in made:
                raise ValueError(f"two documents have the id {doc.document_id!r}")
            made[doc.document_id] = (doc, fields.get("data"))
        return list(made.values())

    async def _sync_message(
        self,
        tenant: str,
        library: str,
        source: str | None,
        entries: list[SyncEntry],
        settle_s: float,
    ) -> LibrarySync:
        """The sync, its list in the message when short, else stored by claim check."""
        sync_id = uuid.uuid4().hex
        common = {"tenant": tenant, "library": library, "source": source, "settle_s": settle_s}
        try:
            if len(entries) <= MAX_INLINE_ENTRIES:
                inline = LibrarySync(**common, documents=tuple(entries), sync_id=sync_id)
                if len(inline.model_dump_json()) <= STORED_MESSAGE_BYTES:
                    return inline
            data = b"".join(e.model_dump_json().encode() + b"\n" for e in entries)
            ref = body_ref(f"sync/{tenant}/{library}/{source or ''}/{sync_id}", data)
            await self._bodies.put_file(tenant, library, ref, data)
            return LibrarySync(**common, listing=ref, sync_id=sync_id)
        except ValidationError as exc:
            raise ValueError(describe_validation_error(exc)) from exc

    async def _publish_sync(self, sync: LibrarySync) -> str:
        """Publish the sync (re-sent until stored; its id makes a re-send stored once) and
        return its ``sync_id``, which its receipt names."""
        headers = {"content-type": "application/json", "Nats-Msg-Id": f"sync:{sync.sync_id}"}
        subject = self.topology.synced(sync.tenant, sync.library)
        js = self.nc.jetstream()
        payload = sync.model_dump_json().encode()
        await until_stored(lambda: js.publish(subject, payload, headers=headers))
        assert sync.sync_id is not None
        return sync.sync_id

    @contextlib.asynccontextmanager
    async def _receipt_of(
        self, tenant: str, library: str
    ) -> AsyncIterator[asyncio.Queue[LibraryReconciled]]:
        """The library's sync receipts, listened for from before the sync is published."""
        queue: asyncio.Queue[LibraryReconciled] = asyncio.Queue()

        async def on_receipt(msg: Msg) -> None:
            with contextlib.suppress(ValidationError):
                queue.put_nowait(LibraryReconciled.model_validate_json(msg.data))

        sub = await self.nc.subscribe(self.topology.reconciled(tenant, library), cb=on_receipt)
        try:
            yield queue
        finally:
            await sub.unsubscribe()


async def _receipt_of_sync(
    queue: asyncio.Queue[LibraryReconciled], sync_id: str
) -> LibraryReconciled:
    while True:
        receipt = await queue.get()
        if receipt.sync_id == sync_id:
            return receipt
