"""What a client writes: documents (text, a file's bytes, a page's address, its own chunks)
and deletions, each checked before it is sent."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, Unpack

from kbus_contract import (
    DocumentAdded,
    DocumentDeleted,
    DocumentProgress,
    DocumentRemoved,
)
from kbus_contract.lanes import Lane
from kbus_contract.wire import describe_validation_error
from nats.aio.msg import Msg
from pydantic import ValidationError

from kbus_client.connection import Connection
from kbus_client.publishing import new_document
from kbus_client.receipts import removal_of
from kbus_client.results import PublishResult
from kbus_client.surface import DocumentFields


class DocumentWrites(Connection):
    """The writes of :class:`kbus_client.KbClient`."""

    async def publish_document(
        self,
        *,
        library: str,
        document_id: str,
        data: bytes | None = None,
        tenant: str | None = None,
        wait: bool = False,
        timeout_s: float = 300.0,
        interactive: bool = False,
        **fields: Unpack[DocumentFields],
    ) -> PublishResult:
        """Publish a document; with ``wait``, return once it is searchable.

        ``interactive``: a person waits for this one (an edit): every stage takes it before
        the tenant's bulk work (an import), which still waits its turn with other tenants'.

        The document is ``text``, or a file's ``data`` as it is (PDF, Office, HTML, CSV...,
        named by ``content_type``; it travels by claim check and the ingestor parses it), or a
        web page's ``url`` that the ingestor fetches. CSV and JSON records need a ``template``.
        Or it is the publisher's own ``chunks`` (indexed as given), each with the texts in
        ``matching`` that find it besides its own (questions, a description). ``source``: the
        source that owns it (:meth:`sync_library`); ``access``: who may read it (users and
        groups; unset: everyone who may read the library).

        An identical publish of the same document right after this client's last one is
        dropped by JetStream and comes back with ``duplicate=True`` and no receipt; not after
        this client deleted it (:mod:`kbus_client.msgids`).

        Raises:
            ValueError: the document is invalid (checked before it is sent).
            DocumentRejectedError: kbus dead-lettered it (``wait`` only).
            TimeoutError: no receipt, and no progress (a large document's part stored),
                for ``timeout_s`` (``wait`` only).
        """
        doc = self.new_document(
            tenant=tenant, library=library, document_id=document_id, data=data, **fields
        )
        return await self.publish(
            doc, data, wait=wait, timeout_s=timeout_s, interactive=interactive
        )

    async def publish(
        self,
        doc: DocumentAdded,
        data: bytes | None = None,
        *,
        wait: bool = False,
        timeout_s: float = 300.0,
        interactive: bool = False,
    ) -> PublishResult:
        """Publish a document :meth:`new_document` made (``data``: its file's bytes)."""
        lane = Lane.INTERACTIVE if interactive else Lane.BULK
        return await self._publisher.publish(doc, wait, timeout_s, data, lane)

    def new_document(
        self,
        *,
        tenant: str | None = None,
        data: bytes | None = None,
        chunks: Sequence[str] | None = None,
        matching: Sequence[Sequence[str]] | None = None,
        access: Sequence[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **fields: Any,
    ) -> DocumentAdded:
        """The document :meth:`publish_document` would send (a file's ``data`` named by its
        claim check, not yet stored), or ``ValueError`` saying what is wrong with it."""
        chosen = self.tenant_for(tenant)
        fields = {"title": "", "text": "", **fields}
        return new_document(
            tenant=chosen,
            # Missing ids are the document's validation's to name (a ValueError).
            body=self._bodies.file_ref(
                chosen, fields.get("library", ""), fields.get("document_id", ""), data
            ),
            metadata=metadata or {},
            chunks=tuple(chunks) if chunks is not None else None,
            matching=tuple(tuple(m) for m in matching) if matching is not None else None,
            access=tuple(access) if access is not None else None,
            **fields,
        )

    @contextlib.asynccontextmanager
    async def progress_of(
        self, library: str, *, tenant: str | None = None, restricted: bool = True
    ) -> AsyncIterator[asyncio.Queue[DocumentProgress]]:
        """How far the indexing of the library's large documents has come, as the indexer
        tells it each time it stores one of their parts: a queue of
        :class:`kbus_contract.DocumentProgress`, filled while this is open (the messages are
        not stored). With ``restricted``, documents not everyone may read too (a credential
        that may write, or act for anyone)."""
        chosen = self.tenant_for(tenant)
        queue: asyncio.Queue[DocumentProgress] = asyncio.Queue()

        async def told(msg: Msg) -> None:
            with contextlib.suppress(ValidationError):
                queue.put_nowait(DocumentProgress.model_validate_json(msg.data))

        forms = (False, True) if restricted else (False,)
        subs = [
            await self.nc.subscribe(self.topology.progress(chosen, library, r), cb=told)
            for r in forms
        ]
        try:
            yield queue
        finally:
            for sub in subs:
                await sub.unsubscribe()

    async def delete_document(
        self,
        *,
        library: str | None = None,
        document_id: str | None = None,
        tenant: str | None = None,
        wait: bool = False,
        timeout_s: float = 120.0,
    ) -> DocumentRemoved | None:
        """Delete a document, a whole library (no ``document_id``) or the whole tenant (neither).

        Everything published before the deletion goes; a later publish is indexed again. With
        ``wait``, returns the receipt saying how many chunks were removed.
        """
        try:
            deletion = DocumentDeleted(
                tenant=self.tenant_for(tenant), library=library, document_id=document_id
            )
        except ValidationError as exc:
            raise ValueError(describe_validation_error(exc)) from exc
        async with removal_of(self.nc, self.topology, deletion, listen=wait) as done:
            subject = self.topology.deleted(deletion.tenant, deletion.library)
            sent = self.nc.jetstream().publish(
                subject,
                deletion.model_dump_json().encode(),
                headers={"content-type": "application/json"},
            )
            await self.interruptions.race(subject, "", sent)
            self._ids.deleted(deletion.tenant, deletion.library, deletion.document_id)
            return await asyncio.wait_for(done, timeout_s) if wait else None
