"""What the gate lets into a stream: a message checked against its subject, with only the
headers kbus keeps, under an id of its tenant's own, within the tenant's budgets.

Each kind of message has one method here; each returns the :class:`Admitted` message the gate
stores, or raises the error the publisher is answered with.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kbus_contract import BodyPart, DocumentAdded, DocumentDeleted, LibrarySync
from kbus_contract.claimcheck import PART_HEADER, body_parts, body_ref, stored_parts
from kbus_contract.errors import ErrorCode, PermanentError
from kbus_contract.intake import (
    BODY_PART_BYTES,
    MSG_ID,
    kept_headers,
    scoped_msg_id,
    valid_msg_id,
)
from kbus_contract.lanes import Lane
from kbus_contract.tenancy import Identity, require_library
from kbus_contract.topology import Topology
from kbus_contract.work import document_work, work_header
from kbus_runtime.answering import Inbound
from kbus_runtime.budgets import MAX_STORED_MESSAGE_BYTES, Budgets, Resource, over_budget
from kbus_runtime.usage import Usage
from nats.js import JetStreamContext


@dataclass(frozen=True)
class Admitted:
    """A message the gate stores: where, what, and what it counts against."""

    subject: str
    stream: str
    payload: bytes
    headers: dict[str, str]
    #: The filter subjects of the tenant's share it counts in (kbus_runtime.usage).
    counted: tuple[str, ...] = ()
    #: Parts of a text the gate moved into the store of large texts first.
    parts: tuple[Admitted, ...] = field(default=())
    #: The document it publishes (tenant, library, id): its newest publish once stored.
    document: tuple[str, str, str] | None = None


#: Each kind of message a tenant sends into the documents stream: its budget, and its unit.
_WAITING = {
    "document.added": Resource.DOCUMENTS_WAITING,
    "document.deleted": Resource.DELETIONS_WAITING,
    "document.synced": Resource.SYNCS_WAITING,
}


class Admission:
    """Checks one message of each kind against its subject and its tenant's budgets."""

    def __init__(
        self,
        topology: Topology,
        budgets: Budgets,
        usage: Usage,
        js: Callable[[], JetStreamContext],
        max_document_bytes: int,
    ) -> None:
        self.topology = topology
        self.budgets = budgets
        self.usage = usage
        self.js = js
        self.max_document_bytes = max_document_bytes

    async def early(self, inbound: Inbound, sent: Identity) -> None:
        """What can be refused from the subject and the size alone, before the message is
        read: a tenant at its budget of what this message would add to."""
        name = self.topology.channel_of(inbound.subject)
        budget = _WAITING.get(name)
        if budget is None or sent.tenant is None:
            return
        await self._within(sent, name, budget)
        if name == "document.added" and len(inbound.body) > MAX_STORED_MESSAGE_BYTES:
            await self._room(sent.tenant, len(inbound.body))

    async def document(self, inbound: Inbound, sent: Identity, doc: DocumentAdded) -> Admitted:
        """A document: its own subject's, its claim-checked text stored, within its budget;
        a text too large to be stored in the message goes into the store of large texts."""
        require_library(sent, doc.tenant, doc.library)
        if doc.body is not None:
            self._fits(doc.body.size)
            await self._require_body(doc.tenant, doc.library, doc.body.name)
        msg_id = _msg_id(inbound)
        counted = await self._within(sent, "document.added", _WAITING["document.added"])
        payload = doc.model_dump_json().encode()
        # What it costs the ingestor, before anything reads it (a page by address: one chunk
        # until fetched; the ingestor's parts take their turns as they are cut).
        work = work_header(document_work(doc.body.size if doc.body else len(doc.text)))
        parts: tuple[Admitted, ...] = ()
        if len(payload) > MAX_STORED_MESSAGE_BYTES:
            doc, parts = await self._claim_text(doc, msg_id)
            payload = doc.model_dump_json().encode()
        return Admitted(
            self.topology.accepted(inbound.subject),
            self.topology.documents_stream.name,
            payload,
            {**self._headers(inbound, sent, msg_id), **work},
            counted,
            parts,
            (doc.tenant, doc.library, doc.document_id),
        )

    async def deletion(
        self, inbound: Inbound, sent: Identity, deletion: DocumentDeleted
    ) -> Admitted:
        """A deletion of a document, a library or the tenant, on its own subject."""
        require_library(sent, deletion.tenant, deletion.library)
        counted = await self._within(sent, "document.deleted", _WAITING["document.deleted"])
        return self._stored(inbound, sent, deletion.model_dump_json().encode(), counted)

    async def sync(self, inbound: Inbound, sent: Identity, sync: LibrarySync) -> Admitted:
        """A sync, its list in the message or stored first."""
        require_library(sent, sync.tenant, sync.library)
        if sync.listing is not None:
            await self._require_body(sync.tenant, sync.library, sync.listing.name)
        counted = await self._within(sent, "document.synced", _WAITING["document.synced"])
        return self._stored(inbound, sent, sync.model_dump_json().encode(), counted)

    async def body_part(self, inbound: Inbound, sent: Identity, part: BodyPart) -> Admitted:
        """A part of a large text, in the share of its subject's tenant and library."""
        if sent.tenant is None or sent.library is None:
            raise PermanentError("send a part on document.body.<tenant>.<library>")
        if len(part.data) > BODY_PART_BYTES:
            raise PermanentError(
                f"a part is {len(part.data)} bytes; the most is {BODY_PART_BYTES}",
                code=ErrorCode.TOO_LARGE,
            )
        self._fits(part.size)
        budget = self.budgets.of(sent.tenant).count(Resource.BODY_BYTES)
        if part.size > budget:
            raise PermanentError(
                f"the text is {part.size} bytes, more than tenant {sent.tenant!r} may keep in "
                f"the store of large texts ({Resource.BODY_BYTES.value}: {budget})",
                code=ErrorCode.TOO_LARGE,
            )
        # The first part makes room for the whole text, the others for themselves.
        await self._room(sent.tenant, part.size if part.part == 0 else len(part.data))
        return self._part(sent.tenant, sent.library, part)

    # -- the steps they share ------------------------------------------------------------------

    def _fits(self, size: int) -> None:
        """Refuse a document larger than kbus takes, from the size its sender declares (the
        first part of its upload says it)."""
        if size > self.max_document_bytes:
            raise PermanentError(
                f"the document is {size} bytes; kbus takes documents of at most "
                f"{self.max_document_bytes} bytes (KBUS_MAX_DOCUMENT_BYTES): split it",
                code=ErrorCode.TOO_LARGE,
            )

    def _stored(
        self, inbound: Inbound, sent: Identity, payload: bytes, counted: tuple[str, ...]
    ) -> Admitted:
        if len(payload) > MAX_STORED_MESSAGE_BYTES:
            raise PermanentError(
                f"the message is {len(payload)} bytes; a stored message is at most "
                f"{MAX_STORED_MESSAGE_BYTES} (send a long list by claim check: listing)",
                code=ErrorCode.TOO_LARGE,
            )
        return Admitted(
            self.topology.accepted(inbound.subject),
            self.topology.documents_stream.name,
            payload,
            self._headers(inbound, sent, _msg_id(inbound)),
            counted,
        )

    def _headers(self, inbound: Inbound, sent: Identity, msg_id: str) -> dict[str, str]:
        """The headers a tenant's message keeps, and its id within its tenant and library."""
        headers = kept_headers(dict(inbound.headers))
        headers[MSG_ID] = scoped_msg_id(sent.tenant or "_", sent.library, msg_id)
        return headers

    async def _within(self, sent: Identity, name: str, budget: Resource) -> tuple[str, ...]:
        """Refuse past the tenant's budget of messages waiting on ``name``; the filters the
        message counts in."""
        tenant = sent.tenant or ""
        counted = tuple(
            subject for lane in Lane for subject in self.topology.lane_filters(name, tenant, lane)
        )
        stream = self.topology.documents_stream.name
        used = sum([await self.usage.messages(stream, subject) for subject in counted])
        limit = self.budgets.of(tenant).count(budget)
        over_budget(tenant, budget, used + 1, limit, "send it again once some are done")
        return counted

    async def _require_body(self, tenant: str, library: str, name: str) -> None:
        if not await stored_parts(self.js(), self.topology, tenant, library, name):
            raise PermanentError(
                f"the claim check names a text ({name}) this library's store does not hold: "
                f"send its parts to document.body.{tenant}.{library} first",
                code=ErrorCode.BODY_MISSING,
            )

    async def _claim_text(
        self, doc: DocumentAdded, msg_id: str
    ) -> tuple[DocumentAdded, tuple[Admitted, ...]]:
        """Move a document's text into the store of large texts; the document then names it."""
        if doc.chunks is not None or doc.matching is not None or not doc.text:
            raise PermanentError(
                "a document with its own chunks or matching texts travels in one message of at "
                f"most {MAX_STORED_MESSAGE_BYTES} bytes: publish it as several documents",
                code=ErrorCode.TOO_LARGE,
            )
        text = doc.text.encode("utf-8")
        await self._room(doc.tenant, len(text))
        ref = body_ref(scoped_msg_id(doc.tenant, doc.library, msg_id), text)
        parts = tuple(self._part(doc.tenant, doc.library, part) for part in body_parts(ref, text))
        # The version is fixed from the text, so both forms of a document get the same one.
        claimed = doc.model_copy(
            update={"text": "", "body": ref, "version": doc.effective_version()}
        )
        return claimed, parts

    async def _room(self, tenant: str, adding: int) -> None:
        """Refuse ``adding`` bytes more of large texts past the tenant's budget."""
        stream = self.topology.bodies_stream.name
        # Each stored part counts as a whole part: an upper bound of the bytes held.
        held = await self.usage.messages(stream, self.topology.bodies_of(tenant))
        over_budget(
            tenant,
            Resource.BODY_BYTES,
            held * BODY_PART_BYTES + adding,
            self.budgets.of(tenant).count(Resource.BODY_BYTES),
            "send it again once its earlier documents are indexed",
        )

    def _part(self, tenant: str, library: str, part: BodyPart) -> Admitted:
        headers = {
            PART_HEADER: str(part.part),
            MSG_ID: scoped_msg_id(tenant, library, f"{part.name}/{part.part}"),
        }
        return Admitted(
            self.topology.body_subject(tenant, library, part.name),
            self.topology.bodies_stream.name,
            bytes(part.data),
            headers,
            (self.topology.bodies_of(tenant),),
        )


def _msg_id(inbound: Inbound) -> str:
    """The publisher's id of its message (a new one where it gave none: then no re-send of it
    is recognised, as in JetStream)."""
    given = {k.lower(): v for k, v in inbound.headers.items()}.get(MSG_ID.lower())
    if given is None:
        return uuid.uuid4().hex
    if not valid_msg_id(given):
        raise PermanentError(
            f"{MSG_ID} must be 1 to 128 printable characters without spaces",
            code=ErrorCode.INVALID_MESSAGE,
        )
    return given
