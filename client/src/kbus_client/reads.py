"""What a client reads of its tenant's libraries: counts, documents, profiles, receipts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

from kbus_contract import (
    BacklogReply,
    BacklogRequest,
    ContentType,
    DocumentEntry,
    FeedKind,
    FeedReply,
    FeedRequest,
    LibraryProfile,
    MetadataScalar,
    ProfileReply,
    ProfileRequest,
    StatsReply,
    StatsRequest,
)
from kbus_contract.wire import PROFILE_WAIT_S
from pydantic import BaseModel

from kbus_client.connection import Connection

R = TypeVar("R", bound=BaseModel)


class LibraryReads(Connection):
    """The reads of :class:`kbus_client.KbClient` besides search, each one request."""

    async def stats(
        self,
        *,
        tenant: str | None = None,
        principals: Sequence[str] = (),
        restricted: bool = False,
    ) -> StatsReply:
        """Documents and chunks per library of a tenant (those ``principals`` may read; every
        document, restricted ones too, with ``restricted``, which only a credential that may
        write, or act for anyone, may ask)."""
        asked = StatsRequest(tenant=self.tenant_for(tenant), principals=tuple(principals))
        return await self._ask("kb.stats", asked, StatsReply, restricted=restricted)

    async def library_names(
        self, *, tenant: str | None = None, principals: Sequence[str] = ()
    ) -> tuple[str, ...]:
        """The libraries of a tenant that hold a document this credential may read (acting
        for ``principals``, as :meth:`stats`)."""
        held = await self.stats(tenant=tenant, principals=principals)
        return tuple(library.library for library in held.libraries)

    async def backlog(self, *, tenant: str | None = None) -> BacklogReply:
        """What of the tenant's own work waits at each stage, lane by lane: what its next
        document waits behind (the stages serve it in turn with other tenants')."""
        asked = BacklogRequest(tenant=self.tenant_for(tenant))
        return await self._ask("kb.backlog", asked, BacklogReply)

    async def profile(
        self,
        library: str,
        *,
        set_to: LibraryProfile | None = None,
        example: str | None = None,
        example_type: ContentType | str = ContentType.MARKDOWN,
        tenant: str | None = None,
    ) -> ProfileReply:
        """A library's profile and its revision; with ``set_to``, set it first for the documents
        ingested after it (the ingestor checks it, cutting ``example`` with it as a document
        of ``example_type`` is cut, and refuses it with the reason where it cannot work)."""
        asked = ProfileRequest(
            tenant=self.tenant_for(tenant),
            library=library,
            profile=set_to,
            example=example,
            example_type=ContentType(example_type),
        )
        # A read goes where a read-only credential may ask too.
        reading = set_to is None and example is None
        if reading:
            return await self._ask("kb.readprofile", asked, ProfileReply)
        return await self._ask(
            "kb.profile", asked, ProfileReply, timeout_s=max(self.timeout_s, PROFILE_WAIT_S)
        )

    async def documents(
        self,
        library: str,
        *,
        filters: dict[str, MetadataScalar | tuple[MetadataScalar, ...]] | None = None,
        limit: int = 100,
        tenant: str | None = None,
        principals: Sequence[str] = (),
        restricted: bool = False,
    ) -> tuple[DocumentEntry, ...]:
        """The first ``limit`` documents of a library by id (those whose metadata matches
        ``filters``, and that ``principals`` may read; restricted ones too with
        ``restricted``, as for :meth:`stats`); :meth:`document_page` says how many there are
        and pages on."""
        page = await self.document_page(
            library,
            filters=filters,
            limit=limit,
            tenant=tenant,
            principals=principals,
            restricted=restricted,
        )
        return page.documents

    async def document_page(
        self,
        library: str,
        *,
        after: str | None = None,
        filters: dict[str, MetadataScalar | tuple[MetadataScalar, ...]] | None = None,
        limit: int = 100,
        tenant: str | None = None,
        principals: Sequence[str] = (),
        restricted: bool = False,
    ) -> StatsReply:
        """One page of :meth:`documents`, by id after ``after``: its ``documents``, the
        ``total`` the listing matched, and the ``after`` that asks for the next page (None:
        the last)."""
        asked = StatsRequest(
            tenant=self.tenant_for(tenant),
            library=library,
            filters=filters or {},
            limit=limit,
            after=after,
            principals=tuple(principals),
        )
        return await self._ask("kb.stats", asked, StatsReply, restricted=restricted)

    async def feed(
        self,
        kind: FeedKind | str = FeedKind.RECEIPTS,
        *,
        library: str | None = None,
        after: int = 0,
        since: datetime | None = None,
        limit: int = 100,
        tenant: str | None = None,
        restricted: bool = False,
    ) -> FeedReply:
        """The tenant's stored receipts or dead letters (of the grant's libraries, or one),
        oldest first: after a stream sequence (a reply's ``last``), or from a time. Those of
        documents not everyone may read too with ``restricted``, which only a credential that
        may write, or act for anyone, may ask."""
        asked = FeedRequest(
            tenant=self.tenant_for(tenant),
            kind=FeedKind(kind),
            library=library,
            after=after,
            since=since,
            limit=limit,
        )
        return await self._ask_feed(asked, restricted)
