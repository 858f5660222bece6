"""The claim check: the text of a document too large for one message waits in an object store.

The publisher stores the text in its tenant's object store and sends ``document.added`` with a
:class:`BodyRef`; the ingestor fetches it from the store of the tenant the subject names (a
reference to another bucket is refused), verifies it, and removes the object once the message
is acknowledged. The store's TTL bounds whatever a crash leaves behind.

A tenant's credential holds no JetStream API (docs/security.md): it writes an object with
publishes alone, in the object store's own format (:func:`put_body`), into a store the operator
provisioned for it (``python -m kbus_searcher.jobs.setup --tenant``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from datetime import UTC, datetime

from nats.js import JetStreamContext
from nats.js.api import Header
from nats.js.errors import BucketNotFoundError, NotFoundError, ObjectNotFoundError
from nats.js.object_store import ObjectStore

from kbus_contract.documents import BodyRef
from kbus_contract.errors import ErrorCode, PermanentError
from kbus_contract.topology import Topology
from kbus_contract.wire import PUBLISH_BOUND_S, until_acknowledged

#: Bytes per chunk message of an object (nats-py's own default).
CHUNK_BYTES = 128 * 1024


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


async def provisioned_bodies(js: JetStreamContext, topology: Topology, tenant: str) -> ObjectStore:
    """The tenant's store of large texts, which a claim check names: ``body_missing`` where
    the operator never provisioned it."""
    try:
        return await open_bodies(js, topology, tenant, create=False)
    except (BucketNotFoundError, NotFoundError) as exc:
        raise PermanentError(
            f"tenant {tenant!r} has no store of large texts: the claim check names nothing "
            "that exists",
            code=ErrorCode.BODY_MISSING,
        ) from exc


def body_ref(bucket: str, key: str, data: bytes) -> BodyRef:
    """The reference ``data`` has once stored under ``key`` (known before it is stored)."""
    name = hashlib.sha256(key.encode()).hexdigest()
    return BodyRef(
        bucket=bucket, name=name, size=len(data), sha256=hashlib.sha256(data).hexdigest()
    )


async def put_body(
    js: JetStreamContext, ref: BodyRef, data: bytes, *, bound_s: float = PUBLISH_BOUND_S
) -> None:
    """Store ``data`` as the object ``ref`` names: its chunks, then the metadata message that
    makes them an object (nats-py's object store reads it). Each publish carries an id, so a
    re-send after a lost acknowledgement (for up to ``bound_s``) is stored once."""
    nuid = uuid.uuid4().hex
    chunks = f"$O.{ref.bucket}.C.{nuid}"
    for number, start in enumerate(range(0, len(data), CHUNK_BYTES)):
        part = data[start : start + CHUNK_BYTES]
        await _publish(js, chunks, part, {"Nats-Msg-Id": f"{nuid}/{number}"}, bound_s)
    info = {
        "name": ref.name,
        "bucket": ref.bucket,
        "nuid": nuid,
        "size": len(data),
        "chunks": -(-len(data) // CHUNK_BYTES),
        "mtime": datetime.now(UTC).isoformat(),
        "digest": "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode(),
        "options": {"max_chunk_size": CHUNK_BYTES},
    }
    meta = f"$O.{ref.bucket}.M.{base64.urlsafe_b64encode(ref.name.encode()).decode()}"
    headers = {Header.ROLLUP: "sub", "Nats-Msg-Id": f"{nuid}/meta"}
    await _publish(js, meta, json.dumps(info).encode(), headers, bound_s)


async def _publish(
    js: JetStreamContext, subject: str, body: bytes, headers: dict[str, str], bound_s: float
) -> None:
    await until_acknowledged(lambda: js.publish(subject, body, headers=headers), bound_s=bound_s)


async def fetch_body(store: ObjectStore, bucket: str, ref: BodyRef) -> bytes:
    """The bytes a reference names, from ``store`` (the bucket ``bucket`` of the tenant the
    message's subject names), verified against its size and hash.

    Raises:
        PermanentError: the reference names another bucket; the object is missing or altered.
    """
    if ref.bucket != bucket:
        raise PermanentError(
            f"the claim check names bucket {ref.bucket!r}, not the tenant's own ({bucket})",
            code=ErrorCode.TENANT_MISMATCH,
        )
    try:
        result = await store.get(ref.name)
    except (ObjectNotFoundError, NotFoundError) as exc:
        raise PermanentError(
            f"the document's text is not in the object store ({ref.bucket}/{ref.name}): it "
            "expired, was removed, or was never stored",
            code=ErrorCode.BODY_MISSING,
        ) from exc
    data = result.data or b""
    if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
        raise PermanentError(
            f"the stored text ({len(data)} bytes) does not match its reference ({ref.size} "
            "bytes and its hash)",
            code=ErrorCode.BODY_MISMATCH,
        )
    return data
