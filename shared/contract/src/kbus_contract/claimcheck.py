"""The claim check: a text (or a sync's list) too large for one message waits in the store of
large texts, one stream shared by every tenant.

The publisher sends the text in parts to ``document.body.{tenant}.{library}`` (the gate stores
each part under ``accepted.document.body.{tenant}.{library}.{name}``, the library's share of the
store, counted against the tenant's budget), then the message with a :class:`BodyRef` naming it.
A service reads a body only under the tenant and library of the message that names it, so a
reference can reach nothing of another tenant or library; it verifies the size and hash, and
removes the parts once the message is settled. The stream's age limit bounds whatever a crash
leaves behind. The store reserves nothing per tenant: it grows with what is stored.
"""

from __future__ import annotations

import hashlib

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from kbus_contract.documents import BodyRef
from kbus_contract.errors import ErrorCode, PermanentError
from kbus_contract.intake import BODY_PART_BYTES, BodyPart
from kbus_contract.topology import Topology

#: The header of each stored part: its number.
PART_HEADER = "Kbus-Part"


def body_ref(key: str, data: bytes) -> BodyRef:
    """The reference ``data`` has once stored under ``key`` (known before it is stored)."""
    return BodyRef(
        name=hashlib.sha256(key.encode()).hexdigest(),
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
    )


def body_parts(ref: BodyRef, data: bytes) -> list[BodyPart]:
    """The parts the publisher sends, in order (at least one, for an empty body)."""
    starts = range(0, max(1, len(data)), BODY_PART_BYTES)
    return [
        BodyPart.of(ref.name, ref.size, number, data[start : start + BODY_PART_BYTES])
        for number, start in enumerate(starts)
    ]


async def read_body(
    js: JetStreamContext, topology: Topology, tenant: str, library: str, ref: BodyRef
) -> bytes:
    """The bytes a reference names, in the share of ``tenant`` and ``library`` (those of the
    message naming it), verified against its size and hash.

    Raises:
        PermanentError: the body is missing (expired, removed, never stored) or altered.
    """
    subject = topology.body_subject(tenant, library, ref.name)
    stream = topology.bodies_stream.name
    parts: dict[int, bytes] = {}
    seq, size = 0, 0
    while size < ref.size or not parts:
        try:
            msg = await js.get_msg(stream, seq=seq + 1, subject=subject, next=True, direct=True)
        except NotFoundError:
            break
        seq = int(msg.seq or 0)
        number = int((msg.headers or {}).get(PART_HEADER, len(parts)))
        if number not in parts:  # a part stored twice (re-sent after its id expired)
            parts[number] = msg.data or b""
            size += len(parts[number])
    data = b"".join(parts[n] for n in sorted(parts))
    if not parts:
        raise PermanentError(
            f"the text its claim check names ({ref.name}) is not in the store: it expired, "
            "was removed, or was never stored. Publish the document again (kbus ingest FILE)",
            code=ErrorCode.BODY_MISSING,
        )
    if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
        raise PermanentError(
            f"the stored text ({len(data)} bytes) does not match its reference ({ref.size} "
            "bytes and its hash)",
            code=ErrorCode.BODY_MISMATCH,
        )
    return data


async def stored_parts(
    js: JetStreamContext, topology: Topology, tenant: str, library: str, name: str
) -> int:
    """How many parts of a body the store holds (0: none)."""
    subject = topology.body_subject(tenant, library, name)
    info = await js.stream_info(topology.bodies_stream.name, subjects_filter=subject)
    return int((info.state.subjects or {}).get(subject, 0))


async def discard_body(
    js: JetStreamContext, topology: Topology, tenant: str, library: str, ref: BodyRef
) -> None:
    """Remove a body's parts (after the message naming it was settled)."""
    subject = topology.body_subject(tenant, library, ref.name)
    await js.purge_stream(topology.bodies_stream.name, subject=subject)
