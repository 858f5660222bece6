"""What each HTTP operation asks kbus, through the client of the request's credential: the same
calls, checks and answers as over NATS (``KbClient``'s), the JSON bodies the contract's models.
"""

from __future__ import annotations

from typing import Any

from kbus_client import KbClient
from kbus_contract import DocumentIndexed, DocumentRemoved, SearchReply, StatsReply
from pydantic import BaseModel

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


async def delete(
    kb: KbClient, library: str, document_id: str | None, *, wait: bool
) -> DocumentRemoved | None:
    """Delete a document, or a whole library (no ``document_id``)."""
    return await kb.delete_document(library=library, document_id=document_id, wait=wait)
