"""Where a document's bytes go when they do not travel in its message: the tenant's object
store (the claim check)."""

from __future__ import annotations

import contextlib
import hashlib

from kbus_contract import BodyRef, DocumentAdded
from kbus_contract.claimcheck import body_ref, open_bodies, put_body
from kbus_contract.topology import Topology
from nats.aio.client import Client
from nats.js.errors import NoStreamResponseError

#: Seconds to wait for the server when asking it to make a tenant's store (an open bus only).
_CREATE_TIMEOUT_S = 2.0


class StoreMissingError(RuntimeError):
    """The tenant has no store of large texts: an operator provisions it."""


class ClaimChecks:
    """Large texts and files of the tenants a client publishes for, in their object stores."""

    def __init__(self, nc: Client, topology: Topology, limit_bytes: int | None) -> None:
        self._nc = nc
        self._topology = topology
        #: Documents whose message would be larger go by claim check (default: the server's
        #: message limit less room for headers).
        self.limit_bytes = limit_bytes

    def file_ref(
        self, tenant: str, library: str, document_id: str, data: bytes | None
    ) -> BodyRef | None:
        """The claim check a file's bytes will have (they are stored once the document is
        valid): named by the document and the bytes' hash, from which its version comes."""
        if data is None:
            return None
        key = f"file/{library}/{document_id}/{hashlib.sha256(data).hexdigest()}"
        return body_ref(self._topology.bodies_bucket(tenant), key, data)

    async def put_file(self, tenant: str, ref: BodyRef, data: bytes) -> None:
        """Store a file's bytes under the name :meth:`file_ref` gave them."""
        await self._put(tenant, ref, data)

    async def payload(self, doc: DocumentAdded, msg_id: str) -> bytes:
        """The message body: the document itself, or its claim check if it is too large."""
        payload = doc.model_dump_json().encode()
        limit = self.limit_bytes or max(1, self._nc.max_payload - 16 * 1024)
        if len(payload) <= limit:
            return payload
        if doc.chunks is not None:
            raise ValueError(
                f"a document with its own chunks travels in the message, and this one is "
                f"{len(payload)} bytes where the bus takes {limit}: publish it as several documents"
            )
        text = doc.text.encode("utf-8")
        ref = body_ref(self._topology.bodies_bucket(doc.tenant), msg_id, text)
        await self._put(doc.tenant, ref, text)
        # The version is fixed from the text, so both forms of a document get the same one.
        claimed = doc.model_copy(
            update={"text": "", "body": ref, "version": doc.effective_version()}
        )
        return claimed.model_dump_json().encode()

    async def _put(self, tenant: str, ref: BodyRef, data: bytes) -> None:
        """Store with publishes alone (all a tenant's credential may do). Where the store is
        missing, an open bus (no accounts) lets the client make it; a tenant's account cannot,
        and says so."""
        js = self._nc.jetstream()
        try:
            await put_body(js, ref, data, bound_s=0)  # one try: is the store there?
            return
        except NoStreamResponseError:
            with contextlib.suppress(Exception):
                await open_bodies(
                    self._nc.jetstream(timeout=_CREATE_TIMEOUT_S),
                    self._topology,
                    tenant,
                    create=True,
                )
        try:
            await put_body(js, ref, data)
        except NoStreamResponseError as exc:
            raise StoreMissingError(
                f"tenant {tenant!r} has no store of large texts ({ref.bucket}): an operator "
                f"provisions it (python -m kbus_searcher.jobs.setup --tenant {tenant})"
            ) from exc
