"""Identifier rules and deterministic ids shared by every stage."""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Annotated

from pydantic import StringConstraints

# Weaviate tenant names allow exactly this alphabet, and none of it is special in a NATS subject.
TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
LIBRARY_PATTERN = TENANT_PATTERN
# Document ids come from other systems (paths, URLs, database keys), so they may hold more, but
# never whitespace or the NATS wildcards `*` and `>`.
DOCUMENT_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:/@~+=#-]{0,255}$"

TenantId = Annotated[str, StringConstraints(pattern=TENANT_PATTERN)]
LibraryId = Annotated[str, StringConstraints(pattern=LIBRARY_PATTERN)]
DocumentId = Annotated[str, StringConstraints(pattern=DOCUMENT_ID_PATTERN)]
#: A source's name within a library (the part of it one publisher keeps in step).
SourceName = Annotated[str, StringConstraints(pattern=TENANT_PATTERN)]
# Principals (users and groups) are named as the publisher's source names them: any text but
# whitespace, commas, and a leading `*` (which marks a document everyone may read).
PRINCIPAL_PATTERN = r"^[^\s,*][^\s,]{0,255}$"
Principal = Annotated[str, StringConstraints(pattern=PRINCIPAL_PATTERN)]
#: What each identifier may hold, in words a person can act on.
PATTERN_WORDS = {
    TENANT_PATTERN: "1 to 64 letters, digits, _ and -, starting with a letter or digit",
    DOCUMENT_ID_PATTERN: "1 to 256 letters, digits and _.:/@~+=#-, starting with a letter, "
    "digit or _ (no spaces)",
    PRINCIPAL_PATTERN: "1 to 256 characters without spaces or commas, not starting with *",
}
_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:/@+=#-")
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
#: The most principals one search claims to act for.
MAX_CLAIMED = 64
#: What a document without ``access`` stores: every reader of its library may read it.
EVERYONE = "*"

# A fixed namespace: chunk ids must be the same on every machine and in every release.
CHUNK_NAMESPACE = uuid.UUID("6f0d3c1e-6a55-4d4e-9a51-5b1f0c2a9e10")


def document_id_of(name: str) -> str:
    """A document id for any name (a file's path, a title), two names never sharing one
    (docs/formats.md, "Document ids"). A name that is an id and holds no ``~`` is its own id.
    In any other, ``~`` is written ``~~`` and each character an id cannot hold ``~XX`` per
    UTF-8 byte (a space is ``~20``); a first character other than a letter or a digit is
    written ``_~XX`` (``-notes.md`` is ``_~2Dnotes.md``). Ids over 256 characters are refused
    when the document is made."""
    if "~" not in name and re.match(DOCUMENT_ID_PATTERN, name):
        return name
    out = [_escaped(name[0], _ALNUM, "_")]
    out.extend("~~" if char == "~" else _escaped(char, _ID_CHARS, "") for char in name[1:])
    return "".join(out)


def _escaped(char: str, allowed: frozenset[str], prefix: str) -> str:
    if char in allowed:
        return char
    return prefix + "".join(f"~{b:02X}" for b in char.encode("utf-8"))


def content_version(*parts: str) -> str:
    """A short, stable version derived from a document's content."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8"))
        digest.update(b"\x1f")
    return digest.hexdigest()[:16]


def chunk_id(tenant: str, library: str, document_id: str, version: str, position: int) -> str:
    """The deterministic id of one chunk: a redelivery overwrites, never duplicates."""
    name = "\x1f".join((tenant, library, document_id, version, str(position)))
    return str(uuid.uuid5(CHUNK_NAMESPACE, name))
