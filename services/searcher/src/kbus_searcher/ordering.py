"""Which of a document's publishes is newer, and how a document is named inside its tenant:
what the state kept in buckets and the store's writes both order by (below both layers).

Versions of texts cut again after a library's profile changed (``python -m
kbus_searcher.jobs.reprocess``):

A text cut again ranks as the publish it was cut from (its ``recut_of``), so it shares that
publish's sequence, and its version is that publish's with ``+profile<revision>``. Between two
publishes of one document at one sequence, the one cut with the later profile revision is the
newer; every other order is by sequence.
"""

from __future__ import annotations

import re

#: A document inside its tenant: (library, document id).
DocumentKey = tuple[str, str]

_REVISION = re.compile(r"\+profile(\d+)$")
_MAX_VERSION = 128


def profile_version(version: str, revision: int) -> str:
    """A stored version made the version of the same text cut with a profile's revision."""
    suffix = f"+profile{revision}"
    return _REVISION.sub("", version)[: _MAX_VERSION - len(suffix)] + suffix


def recut_revision(version: str) -> int:
    """The profile revision a version was cut again with (-1: never cut again)."""
    found = _REVISION.search(version)
    return int(found.group(1)) if found else -1


def rank(sequence: int, version: str) -> tuple[int, int]:
    """Which of a document's publishes is newer: the higher rank."""
    return sequence, recut_revision(version)
