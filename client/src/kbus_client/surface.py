"""What an agent's tool and memory need of a knowledge base: the client's surface, as a
protocol. :class:`kbus_client.KbClient` has it; the tool (:mod:`.tool`) and the memory
(:mod:`.memory`) are built from anything that does, and import no client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypedDict

from kbus_contract import (
    ContentType,
    DocumentEntry,
    DocumentRemoved,
    Expand,
    MetadataScalar,
    RecordTemplate,
    SearchReply,
    SearchType,
    TransformerKind,
)

from kbus_client.results import PublishResult


class SearchOptions(TypedDict, total=False):
    """A search's choices besides its query and libraries: each is the
    :class:`kbus_contract.SearchRequest` field of its name (docs/searching.md)."""

    k: int | None
    search_type: SearchType | str
    alpha: float | None
    min_score: float | None
    min_similarity: float | None
    min_evidence: float | None
    rewrite: bool | None
    transformer: TransformerKind | str | None
    rerank: bool | None
    rerank_depth: int | None
    filters: dict[str, MetadataScalar | tuple[MetadataScalar, ...]] | None
    group_by_document: bool
    exclude_documents: tuple[str, ...]
    principals: Sequence[str]
    budget_tokens: int | None
    expand: Expand | str
    adaptive: bool
    cursor: str | None


class DocumentFields(TypedDict, total=False):
    """What a published document holds besides its library, id and a file's bytes: each is the
    :class:`kbus_contract.DocumentAdded` field of its name (docs/formats.md)."""

    title: str
    text: str
    url: str | None
    template: RecordTemplate | dict[str, Any] | None
    source_uri: str
    content_type: ContentType | str
    metadata: dict[str, Any] | None
    version: str | None
    chunks: Sequence[str] | None
    matching: Sequence[Sequence[str]] | None
    source: str | None
    access: Sequence[str] | None


class KnowledgeBase(Protocol):
    """Search, publish, list and delete, for one tenant or those its credential may name:
    each as :class:`kbus_client.KbClient`'s method of its name takes it (the surface is the
    client's; this names only what the tool and the memory call)."""

    def tenant_for(self, tenant: str | None = None) -> str: ...

    @property
    def search(self) -> Callable[..., Awaitable[SearchReply]]: ...

    @property
    def library_names(self) -> Callable[..., Awaitable[tuple[str, ...]]]: ...

    @property
    def publish_document(self) -> Callable[..., Awaitable[PublishResult]]: ...

    @property
    def documents(self) -> Callable[..., Awaitable[tuple[DocumentEntry, ...]]]: ...

    @property
    def delete_document(self) -> Callable[..., Awaitable[DocumentRemoved | None]]: ...
