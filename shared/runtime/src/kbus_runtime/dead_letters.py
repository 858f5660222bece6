"""What a message that cannot be handled becomes: its dead letter and, for a document, its
``document.failed`` receipt, made from its subject and body (publishing them is
:meth:`kbus_runtime.stage.Stage.record_dead_letter`'s)."""

from __future__ import annotations

import json
from typing import Any

from kbus_contract import ORIGINAL_LIMIT, DeadLetter, DocumentFailed
from kbus_contract.topology import Topology

#: The longest reason a dead letter keeps.
REASON_LIMIT = 4_096


def identity_of(body: bytes) -> dict[str, str]:
    """Best-effort tenant, library and document id of a message, even a malformed one."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    nested = data.get("document")
    source: dict[str, Any] = nested if isinstance(nested, dict) else data
    return {
        key: value[:256]
        for key in ("tenant", "library", "document_id")
        if isinstance(value := source.get(key), str)
    }


def letter_of(
    topology: Topology,
    *,
    stage: str,
    code: str,
    reason: str,
    subject: str,
    sequence: int | None,
    deliveries: int,
    body: bytes,
) -> DeadLetter:
    """A message's dead letter, under the tenant and library its subject names (a message
    between the services, whose subject names none, carries them in its body: the services
    wrote it)."""
    return DeadLetter(
        stage=stage,
        code=code,
        reason=reason[:REASON_LIMIT],
        subject=subject,
        stream_sequence=sequence,
        deliveries=deliveries,
        original=body[:ORIGINAL_LIMIT].decode("utf-8", errors="replace"),
        original_size=len(body),
        **identity(topology, subject, body),
    )


def failure_of(topology: Topology, letter: DeadLetter) -> DocumentFailed | None:
    """The ``document.failed`` receipt of a dead-lettered document (None: the letter is of a
    deletion, or names no document)."""
    is_document = not letter.subject.startswith(topology.document_deleted[:-1])
    if not (is_document and letter.tenant and letter.library and letter.document_id):
        return None
    return DocumentFailed(
        tenant=letter.tenant,
        library=letter.library,
        document_id=letter.document_id,
        stage=letter.stage,
        code=letter.code,
        reason=letter.reason,
    )


def identity(topology: Topology, subject: str, body: bytes) -> dict[str, str | None]:
    """The tenant, library and document id a message is of: its subject's when the subject
    names them (a tenant's), else its body's (between the services, which wrote it)."""
    named: dict[str, str | None] = dict(identity_of(body))
    if not topology.names_tenant(subject):
        return named  # between the services: they wrote the body
    sent = topology.identity(subject)
    return {"tenant": sent.tenant, "library": sent.library, "document_id": named.get("document_id")}
