"""What each HTTP operation asks kbus, through the client of the request's credential: the same
calls, checks and answers as over NATS (``KbClient``'s), the JSON bodies the contract's models.
"""

from __future__ import annotations

import contextlib
from typing import Any

from kbus_client import KbClient
from kbus_client.replays import replay_letter
from kbus_contract import (
    BacklogReply,
    ContentType,
    DeadLetter,
    DocumentIndexed,
    DocumentRemoved,
    LibraryProfile,
    LibraryReconciled,
    ProfileReply,
    SearchReply,
    StatsReply,
)
from kbus_contract.errors import ErrorCode, PermanentError
from kbus_contract.feed import MAX_FEED_ENTRIES, FeedKind
from kbus_contract.formats import FORMATS
from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: Each file's media type and the format it is published as (records, which need a
#: template, are published with one over ``PUT .../documents``).
FORMATS_BY_MEDIA: dict[str, ContentType] = {ct.value: ct for ct in FORMATS if not ct.records}
#: Fields of a search body the console sets itself (the deadline: its own wait's).
SET_BY_CONSOLE = ("budget_ms",)
#: Fields of a publish body the path sets.
NAMED_BY_PATH = ("library", "document_id")


class Published(BaseModel):
    """What a publish over HTTP answers."""

    document_id: str
    version: str
    duplicate: bool
    #: Searchable (``wait``): its receipt.
    receipt: DocumentIndexed | None = None


async def search(kb: KbClient, body: dict[str, Any]) -> SearchReply:
    """``kb.search`` with the body's query, libraries and options (a tenant named is asked
    for as over NATS: the bus refuses one the credential does not reach)."""
    body.pop("budget_ms", None)  # the console's wait decides it
    query = body.pop("query", None)
    libraries = body.pop("libraries", None)
    if not isinstance(query, str) or not isinstance(libraries, list):
        raise ValueError("a search needs query (text) and libraries (a list of names)")
    return await kb.search(query, libraries=libraries, **body)


async def libraries(kb: KbClient, principals: list[str]) -> StatsReply:
    """The libraries the credential reaches, with their counts (those ``principals`` read)."""
    return await kb.stats(principals=principals)


async def documents(
    kb: KbClient,
    library: str,
    after: str | None,
    limit: int,
    principals: list[str],
    filters: dict[str, Any] | None,
) -> StatsReply:
    """A page of a library's documents, by id, after ``after``."""
    return await kb.document_page(
        library, after=after, limit=limit, principals=principals, filters=filters
    )


async def publish(
    kb: KbClient,
    library: str,
    document_id: str,
    body: dict[str, Any],
    *,
    wait: bool,
    interactive: bool,
) -> Published:
    """Publish a document: its fields from the body, its place from the path."""
    for name, value in (("library", library), ("document_id", document_id)):
        if body.pop(name, value) != value:
            raise ValueError(f"{name} is named by the path ({value}), not the body")
    result = await kb.publish_document(
        library=library, document_id=document_id, wait=wait, interactive=interactive, **body
    )
    return Published(
        document_id=result.document_id,
        version=result.version,
        duplicate=result.duplicate,
        receipt=result.receipt,
    )


class SyncBody(BaseModel):
    """A sync: the documents a library (or one source's part of it) holds from now on, each
    with a publish body's fields and its ``document_id``; kbus deletes what the list does not
    name."""

    model_config = ConfigDict(extra="forbid")

    documents: list[dict[str, Any]]
    source: str | None = Field(default=None, description="The part of the library it holds.")


class Synced(BaseModel):
    """What a sync did: its receipt, and the documents it published, changed and deleted."""

    receipt: LibraryReconciled
    published: int
    added: tuple[str, ...]
    changed: tuple[str, ...]
    deleted: tuple[str, ...]


async def sync(kb: KbClient, library: str, body: SyncBody) -> Synced:
    """Make the library hold exactly the body's documents (only those new or at a new version
    are published), answered once its receipt says what it did."""
    for document in body.documents:
        if document.pop("library", library) != library:
            raise ValueError(f"library is named by the path ({library}), not a document")
        if "data" in document:
            raise ValueError(
                "a sync over HTTP lists texts and web pages' addresses, not a file's bytes: "
                "sync a folder of files with the CLI (kbus sync)"
            )
    done = await kb.sync_library(library, body.documents, source=body.source)
    return Synced(
        receipt=done.receipt,
        published=done.published,
        added=done.added,
        changed=done.changed,
        deleted=done.deleted,
    )


async def delete(
    kb: KbClient, library: str, document_id: str | None, *, wait: bool
) -> DocumentRemoved | None:
    """Delete a document, or a whole library (no ``document_id``)."""
    return await kb.delete_document(library=library, document_id=document_id, wait=wait)


class StoredLetter(BaseModel):
    """A dead letter and its place in the stream (what a replay names)."""

    sequence: int
    letter: DeadLetter


class Letters(BaseModel):
    """The tenant's dead letters its credential may read, oldest first."""

    letters: tuple[StoredLetter, ...]


async def backlog(kb: KbClient) -> BacklogReply:
    """What of the tenant's own work waits at each stage (``kb.backlog``)."""
    return await kb.backlog()


async def dead_letters(
    kb: KbClient, restricted: bool, after: int = 0, limit: int = MAX_FEED_ENTRIES
) -> Letters:
    """The tenant's dead letters (those of restricted documents too where it may), after a
    stream sequence."""
    page = await kb.feed(FeedKind.DEAD_LETTERS, after=after, limit=limit, restricted=restricted)
    letters = []
    for entry in page.entries:
        with contextlib.suppress(ValidationError):
            letter = DeadLetter.model_validate(entry.message)
            letters.append(StoredLetter(sequence=entry.sequence, letter=letter))
    return Letters(letters=tuple(letters))


async def replay(kb: KbClient, sequence: int, restricted: bool) -> StoredLetter:
    """Send a dead letter's message again (the gate removes the letter once it is stored).

    Raises:
        PermanentError: the credential reads no dead letter ``sequence``.
        ReplayError: the letter keeps only part of its message.
    """
    # One read: the first letter from ``sequence`` on that the credential may read.
    first = (await dead_letters(kb, restricted, after=max(0, sequence - 1), limit=1)).letters
    found = first[0] if first and first[0].sequence == sequence else None
    if found is None:
        raise PermanentError(
            f"there is no dead letter {sequence} this token may read", code=ErrorCode.INVALID
        )
    await replay_letter(kb.nc, kb.topology, sequence, found.letter)
    return found


class ProfileChange(BaseModel):
    """A library's new profile, and a sample document to cut with it."""

    profile: LibraryProfile
    example: str | None = None


async def profile(kb: KbClient, library: str, change: ProfileChange | None) -> ProfileReply:
    """A library's profile; with ``change``, set first (the sample cut with it)."""
    if change is None:
        return await kb.profile(library)
    return await kb.profile(library, set_to=change.profile, example=change.example)


async def publish_file(
    kb: KbClient, library: str, document_id: str, data: bytes, media_type: str, wait: bool
) -> Published:
    """A file's bytes as a document (by claim check), its format from its media type."""
    kind = FORMATS_BY_MEDIA.get(media_type)
    if kind is None:
        raise PermanentError(
            f"kbus takes no files of type {media_type or '(none)'}: send one of "
            + ", ".join(sorted(FORMATS_BY_MEDIA)),
            code=ErrorCode.UNSUPPORTED_CONTENT_TYPE,
        )
    result = await kb.publish_document(
        library=library, document_id=document_id, data=data, content_type=kind, wait=wait
    )
    return Published(
        document_id=result.document_id,
        version=result.version,
        duplicate=result.duplicate,
        receipt=result.receipt,
    )
