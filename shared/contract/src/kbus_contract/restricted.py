"""Which records name a restricted document (one whose ``access`` is not everyone).

A receipt or dead letter of such a document goes on its channel's form for restricted documents
(:data:`kbus_contract.catalog.RESTRICTED`), which only credentials that may write the library or
act for anyone reach: a credential bound to some principals never hears the id, the version or
the text of a document it may not read. What cannot be shown to be everyone's counts as
restricted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kbus_contract.identifiers import EVERYONE


def may_name_restricted(write: bool, acts_for: Sequence[str] | None) -> bool:
    """Whether a credential reaches what names restricted documents: one that may write the
    library (it publishes them, and lists every version with ``kb.versions``) or that may act
    for anyone (``acts_for`` None)."""
    return write or acts_for is None


def is_everyones(readers: Sequence[str]) -> bool:
    """Whether ``access`` as stored (a chunk's or a document reference's) is everyone."""
    return list(readers) == [EVERYONE]


def message_is_everyones(channel: str, body: bytes) -> bool:
    """Whether a message (of catalog channel ``channel``, malformed or not) is positively about
    a document everyone may read, or about no one document (a library's or tenant's deletion).
    A sync names many documents, and a body that cannot be read names who knows what: neither
    is."""
    data = _parsed(body)
    if data is None or channel == "document.synced":
        return False
    if channel == "document.added":
        return not data.get("access")
    if channel == "document.deleted":
        return data.get("document_id") is None
    document = data.get("document")
    if isinstance(document, dict):
        return is_everyones(document.get("access") or ())
    return False


def _parsed(body: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
