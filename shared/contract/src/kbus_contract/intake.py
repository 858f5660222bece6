"""The gate: what a tenant sends into kbus's streams, and what it is answered.

A tenant never writes a stream. ``document.added``, ``document.deleted``, ``document.synced``
and ``document.body`` are requests the gateway answers (a NATS micro service). It checks the
message against its subject, keeps only the headers below, deduplicates within the tenant's
own ids, holds the tenant to its budgets, and stores the message under the subject's
:data:`~kbus_contract.catalog.ACCEPTED` form, which only kbus's services reach. It answers the
way JetStream answers a publish (:class:`Accepted`, or a JetStream API error), so ``nats pub
--jetstream`` and nats-py's ``js.publish`` work unchanged; the answer tells nothing of other
tenants (no stream sequence: ``seq`` is always 0).
"""

from __future__ import annotations

import base64
import re
from typing import Literal

from pydantic import Base64Bytes, BaseModel, Field

from kbus_contract.base import Contract
from kbus_contract.errors import ErrorCode

#: The headers a tenant's message keeps on its way into a stream (lower case); every other
#: header (``reply_to``, ``Status``, ``Nats-*`` but the id, FastStream's own) is dropped.
KEPT_HEADERS = frozenset({"content-type", "traceparent", "tracestate"})
#: The header a publisher names a message with (JetStream's deduplication id).
MSG_ID = "Nats-Msg-Id"
#: The header a replayed dead letter's message carries: the dead letter's sequence. Once the
#: message is stored, the gate removes that dead letter, if it is of the sender's own tenant
#: and a library its credential reaches and holds exactly the message replayed (a tenant's
#: credential may not delete from the dead-letter stream itself); otherwise the header does
#: nothing. It is not kept with the message.
REPLAY_OF = "Kbus-Replay-Of"
#: The longest id a publisher may give a message.
MAX_MSG_ID = 128
_MSG_ID = re.compile(r"^[\x21-\x7e]{1,128}$")
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
#: Bytes of a document's text, or a list, per part in the store of large texts.
BODY_PART_BYTES = 256 * 1024
#: A stored body's name: 64 hex digits (the client names it by a hash).
BODY_NAME = r"^[0-9a-f]{64}$"


def scoped_msg_id(tenant: str, library: str | None, msg_id: str) -> str:
    """The id a tenant's message is stored under: its own id within its tenant and library,
    so no other tenant (or another library's credential) can take it."""
    return f"{tenant}/{library or '_'}/{msg_id}"


def valid_msg_id(msg_id: str) -> bool:
    """Whether a publisher's id is one the gate keeps (printable, at most 128 characters)."""
    return bool(_MSG_ID.match(msg_id))


def kept_headers(headers: dict[str, str] | None) -> dict[str, str]:
    """What of a tenant's headers goes on with its message: the content type if it says JSON,
    and a well-formed trace context. Nothing else."""
    kept: dict[str, str] = {}
    for name, value in (headers or {}).items():
        key = name.lower()
        if key not in KEPT_HEADERS or not isinstance(value, str) or len(value) > 512:
            continue
        if key == "content-type" and value.split(";")[0].strip() != "application/json":
            continue
        if key == "traceparent" and not _TRACEPARENT.match(value):
            continue
        kept[key] = value
    return kept


class Accepted(BaseModel):
    """The gate's answer to a message it stored, shaped as JetStream's publish acknowledgement
    (``seq`` is always 0: a tenant learns nothing of the shared stream)."""

    stream: str
    seq: int = 0
    duplicate: bool = False


class RefusalInfo(BaseModel):
    """A JetStream API error: ``code`` is HTTP-like, ``err_code`` kbus's number for the
    refusal, ``description`` one sentence starting with kbus's error code."""

    code: int
    err_code: int
    description: str


class Refused(BaseModel):
    """The gate's answer to a message it did not store, shaped as JetStream's error reply (nats-py
    raises it as ``APIError``)."""

    error: RefusalInfo


#: kbus's refusals as JetStream-style error numbers (JetStream's own are 10000-10999).
REFUSAL_BASE = 19_000
#: The HTTP-like code of a refusal that is neither wrong input (400) nor worth a re-send (503).
_HTTP: dict[str, int] = {ErrorCode.QUOTA_EXCEEDED: 429, ErrorCode.BODY_MISSING: 404}


def refusal_number(code: str) -> int:
    """A stable number for a kbus error code (its place in :class:`ErrorCode`, after 19000)."""
    members = list(ErrorCode)
    known = code in ErrorCode._value2member_map_
    return REFUSAL_BASE + (members.index(ErrorCode(code)) if known else 0)


def refused(code: str, message: str, *, retryable: bool = False) -> Refused:
    """The gate's refusal: 503 for what a re-send of the same message may get through (a
    stream without a leader: publishers send again), 429 past a budget, 400 for a message that
    will never be stored as it is."""
    http = _HTTP.get(code, 503 if retryable else 400)
    info = RefusalInfo(code=http, err_code=refusal_number(code), description=f"{code}: {message}")
    return Refused(error=info)


def refusal_code(err_code: int | None, description: str | None) -> str:
    """The kbus error code a gate's refusal carries (read back by the client): the one its
    description starts with, else the one its number says."""
    head = (description or "").partition(":")[0]
    if head in ErrorCode._value2member_map_:
        return head
    if err_code is not None and REFUSAL_BASE <= err_code < REFUSAL_BASE + len(ErrorCode):
        return list(ErrorCode)[err_code - REFUSAL_BASE].value
    return ErrorCode.BUS_ERROR.value


class BodyPart(Contract):
    """One part of a large text (or a sync's list), sent to ``document.body.{tenant}.{library}``
    before the message that refers to it. Parts are numbered from 0; the last says how many
    there are. A re-sent part is stored once."""

    kind: Literal["body_part"] = "body_part"
    name: str = Field(pattern=BODY_NAME, description="The body's name (what its BodyRef says).")
    size: int = Field(ge=0, description="Bytes of the whole body (its BodyRef's size).")
    part: int = Field(ge=0, le=1_000_000)
    data: Base64Bytes = Field(description=f"At most {BODY_PART_BYTES} bytes, base64.")

    @classmethod
    def of(cls, name: str, size: int, part: int, data: bytes) -> BodyPart:
        """A part holding ``data`` (the bytes themselves, not their base64)."""
        return cls.model_validate(
            {"name": name, "size": size, "part": part, "data": base64.b64encode(data)}
        )
