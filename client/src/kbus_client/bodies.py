"""Where a document's bytes go when they do not travel in its message: the library's share of
the store of large texts, sent through the gate in parts (the claim check)."""

from __future__ import annotations

import hashlib
from functools import partial

from kbus_contract import BodyRef, DocumentAdded
from kbus_contract.claimcheck import body_parts, body_ref
from kbus_contract.intake import MSG_ID
from kbus_contract.topology import Topology
from nats.aio.client import Client

from kbus_client.storing import until_stored

#: The largest message the gate stores as it is: a larger document's text goes by claim check
#: (the gate would move it there itself; the client does it first and spares the bus a copy).
STORED_MESSAGE_BYTES = 256 * 1024


class ClaimChecks:
    """Large texts and files of the tenants a client publishes for."""

    def __init__(self, nc: Client, topology: Topology, limit_bytes: int | None) -> None:
        self._nc = nc
        self._topology = topology
        #: Documents whose message would be larger go by claim check (default: what the gate
        #: stores as it is).
        self.limit_bytes = limit_bytes

    def file_ref(
        self, tenant: str, library: str, document_id: str, data: bytes | None
    ) -> BodyRef | None:
        """The claim check a file's bytes will have (they are stored once the document is
        valid): named by the document and the bytes' hash, from which its version comes."""
        if data is None:
            return None
        return body_ref(f"file/{tenant}/{library}/{document_id}/{_digest(data)}", data)

    async def put_file(self, tenant: str, library: str, ref: BodyRef, data: bytes) -> None:
        """Store bytes under the name a reference gives them, in the library's share."""
        subject = self._topology.subject("document.body", tenant=tenant, library=library)
        js = self._nc.jetstream()
        for part in body_parts(ref, data):
            payload = part.model_dump_json().encode()
            headers = {"content-type": "application/json", MSG_ID: f"{ref.name}/{part.part}"}
            await until_stored(partial(js.publish, subject, payload, headers=headers))

    async def payload(self, doc: DocumentAdded, msg_id: str) -> bytes:
        """The message body: the document itself, or its claim check if it is too large."""
        payload = doc.model_dump_json().encode()
        limit = self.limit_bytes or STORED_MESSAGE_BYTES
        if len(payload) <= limit:
            return payload
        if doc.chunks is not None or doc.matching is not None:
            raise ValueError(
                f"a document with its own chunks travels in the message, and this one is "
                f"{len(payload)} bytes where the bus takes {STORED_MESSAGE_BYTES}: publish it "
                "as several documents"
            )
        text = doc.text.encode("utf-8")
        ref = body_ref(f"text/{doc.tenant}/{doc.library}/{msg_id}", text)
        await self.put_file(doc.tenant, doc.library, ref, text)
        # The version is fixed from the text, so both forms of a document get the same one.
        claimed = doc.model_copy(
            update={"text": "", "body": ref, "version": doc.effective_version()}
        )
        return claimed.model_dump_json().encode()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
