"""The claim check: the text of a document too large for one message waits in an object store.

The publisher stores the text in its tenant's object store and sends ``document.added`` with a
:class:`BodyRef`; the ingestor fetches it from the store of the tenant the subject names (a
reference to another bucket is refused), verifies it, and removes the object once the message
is acknowledged. The store's TTL bounds whatever a crash leaves behind.
"""

from __future__ import annotations

import hashlib

from nats.js import JetStreamContext
from nats.js.errors import BucketNotFoundError, NotFoundError, ObjectNotFoundError
from nats.js.object_store import ObjectStore

from kbus_contract.documents import BodyRef
from kbus_contract.errors import PermanentError
from kbus_contract.topology import Topology


async def open_bodies(
    js: JetStreamContext, topology: Topology, tenant: str, *, create: bool
) -> ObjectStore:
    """The object store of a tenant's large documents' text, created if asked and missing."""
    bucket = topology.bodies_bucket(tenant)
    try:
        return await js.object_store(bucket)
    except (BucketNotFoundError, NotFoundError):
        if not create:
            raise
    # nats-py takes the bucket name from its own argument, not from the config.
    return await js.create_object_store(bucket, config=topology.bodies_store(tenant))


def body_ref(bucket: str, key: str, data: bytes) -> BodyRef:
    """The reference ``data`` has once stored under ``key`` (known before it is stored)."""
    name = hashlib.sha256(key.encode()).hexdigest()
    return BodyRef(
        bucket=bucket, name=name, size=len(data), sha256=hashlib.sha256(data).hexdigest()
    )


async def put_body(store: ObjectStore, bucket: str, key: str, body: str | bytes) -> BodyRef:
    """Store a document's text or bytes under a name derived from ``key``; returns its
    reference."""
    data = body.encode("utf-8") if isinstance(body, str) else body
    ref = body_ref(bucket, key, data)
    await store.put(ref.name, data)
    return ref


async def fetch_body(store: ObjectStore, bucket: str, ref: BodyRef) -> bytes:
    """The bytes a reference names, from ``store`` (the bucket ``bucket`` of the tenant the
    message's subject names), verified against its size and hash.

    Raises:
        PermanentError: the reference names another bucket; the object is missing or altered.
    """
    if ref.bucket != bucket:
        raise PermanentError(
            f"the claim check names bucket {ref.bucket!r}, not the tenant's own ({bucket})",
            code="tenant_mismatch",
        )
    try:
        result = await store.get(ref.name)
    except (ObjectNotFoundError, NotFoundError) as exc:
        raise PermanentError(
            f"the document's text is not in the object store ({ref.bucket}/{ref.name}): it "
            "expired, was removed, or was never stored",
            code="body_missing",
        ) from exc
    data = result.data or b""
    if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
        raise PermanentError(
            f"the stored text ({len(data)} bytes) does not match its reference ({ref.size} "
            "bytes and its hash)",
            code="body_mismatch",
        )
    return data
