"""Syncs: a publisher's complete list of what one source holds, and what kbus made of it.

A :class:`LibrarySync` on ``document.synced.{tenant}.{library}`` says which documents (ids and
versions) a library, or the part of it one source owns, holds now. The searcher deletes every
document of that source indexed before the sync and not on the list, waits for the listed
versions to be searchable, and publishes one :class:`LibraryReconciled` receipt. The list
travels in the message, or (for a large source) by claim check as JSON lines of
:class:`SyncEntry`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from kbus_contract.base import Contract
from kbus_contract.documents import BodyRef
from kbus_contract.identifiers import DocumentId, LibraryId, SourceName, TenantId

#: The most entries a sync carries in its message (more go by claim check).
MAX_INLINE_ENTRIES = 1_000
#: The most entries one sync lists.
MAX_LISTED = 1_000_000
#: Document ids a receipt names of those it could not settle (its count says how many).
MAX_NAMED = 100
#: Entries of one page of a ``kb.versions`` answer.
MAX_VERSIONS_PAGE = 1_000


class SyncEntry(Contract):
    """One document a source holds now, at its version (``DocumentAdded.effective_version``)."""

    document_id: DocumentId
    version: str = Field(min_length=1, max_length=128)


class LibrarySync(Contract):
    """The complete list of one source's documents (``source`` unset: the whole library's)."""

    tenant: TenantId
    library: LibraryId
    source: SourceName | None = None
    documents: tuple[SyncEntry, ...] | None = Field(
        default=None, max_length=MAX_INLINE_ENTRIES, description="The list, when it is short."
    )
    listing: BodyRef | None = Field(
        default=None, description="The list by claim check: JSON lines of SyncEntry."
    )
    settle_s: float = Field(
        default=300.0,
        ge=0.0,
        le=3_600.0,
        description="How long the sync waits for listed versions still in the pipeline.",
    )
    sync_id: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.:-]{1,64}$",
        description="The publisher's name for this sync: its receipt names it again.",
    )

    @model_validator(mode="after")
    def _one_list(self) -> LibrarySync:
        if (self.documents is None) == (self.listing is None):
            raise ValueError("a sync carries its list in documents or in listing, not both")
        return self


class LibraryReconciled(Contract):
    """Receipt: what one sync did (``document.reconciled.{tenant}.{library}``)."""

    tenant: str
    library: str
    source: str | None
    sync_id: str | None = Field(default=None, description="The sync's own sync_id.")
    added: int
    changed: int
    unchanged: int
    deleted: int
    superseded: int = Field(
        default=0, description="Listed documents a deletion published after the sync removed."
    )
    failed: int
    unsettled: tuple[str, ...] = Field(
        default=(),
        description=f"The first {MAX_NAMED} listed documents not searchable at their listed "
        "version (or a later one) within settle_s: counted as failed.",
    )
    refused: str | None = Field(
        default=None,
        description="Why the sync was not applied at all (code: reason; its dead letter holds "
        "it); the counts are then 0.",
    )
    dead_lettered: tuple[str, ...] = Field(
        default=(),
        description=f"The first {MAX_NAMED} listed documents dead-lettered while the sync "
        "waited for them, each as 'id: code: reason' (counted as failed; the sync stopped "
        "waiting for them).",
    )


class VersionsRequest(Contract):
    """The indexed versions of a library's documents (``kb.versions``), by document id, in
    pages: what a publisher compares with its source before it syncs."""

    tenant: TenantId
    library: LibraryId
    source: SourceName | None = None
    after: str | None = Field(
        default=None, max_length=256, description="The previous page's last id."
    )
    limit: int = Field(default=MAX_VERSIONS_PAGE, ge=1, le=MAX_VERSIONS_PAGE)


class VersionsReply(Contract):
    """One page of a :class:`VersionsRequest`'s answer; ``after`` asks for the next (None: done)."""

    kind: Literal["versions"] = "versions"
    documents: tuple[SyncEntry, ...]
    after: str | None = None
