"""A tenant's receipts and dead letters as kbus stored them (``kb.feed``).

Receipts and dead letters reach a tenant's credential live on its own subjects
(``document.indexed.{tenant}.{library}``, ``deadletter.*.{tenant}.{library}``). What went by
while no one listened is read back with ``kb.feed``: the stored messages of the grant's
libraries, oldest first, after a stream sequence or from a time.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field

from kbus_contract.base import Contract
from kbus_contract.identifiers import LibraryId, TenantId

#: Entries a feed reply holds at most.
MAX_FEED_ENTRIES = 500


class FeedKind(StrEnum):
    """Which of a tenant's records to read."""

    #: ``document.indexed``, ``document.removed`` and ``document.failed``.
    RECEIPTS = "receipts"
    #: Dead letters, with their reasons and originals.
    DEAD_LETTERS = "dead_letters"


class FeedRequest(Contract):
    """Ask for a tenant's stored receipts or dead letters (``kb.feed``)."""

    tenant: TenantId
    kind: FeedKind = FeedKind.RECEIPTS
    library: LibraryId | None = Field(
        default=None, description="Only this library's (else every library of the grant)."
    )
    after: int = Field(
        default=0, ge=0, description="Entries stored after this sequence (the reply's `last`)."
    )
    since: datetime | None = Field(
        default=None, description="Entries stored at or after this time (with `after` 0)."
    )
    limit: int = Field(default=100, ge=1, le=MAX_FEED_ENTRIES)


class FeedEntry(Contract):
    """One stored receipt or dead letter."""

    sequence: int
    time: datetime
    subject: str
    #: The message's catalog name: ``document.indexed``, ``deadletter``, ...
    channel: str
    message: dict[str, Any]


class FeedReply(Contract):
    """The answer to a :class:`FeedRequest`: entries in stream order."""

    kind: Literal["feed"] = "feed"
    tenant: str
    entries: tuple[FeedEntry, ...]
    last: int = Field(description="Ask again with `after` set to this for what follows.")
    more: bool = Field(description="More entries were stored after `last` when this was read.")
