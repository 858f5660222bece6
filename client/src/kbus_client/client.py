"""The async client: publish documents, wait for receipts, search."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial
from types import TracebackType
from typing import Any, TypeVar

import nats
from kbus_contract import (
    ContentType,
    DocumentAdded,
    DocumentDeleted,
    DocumentRemoved,
    Expand,
    FeedRequest,
    MetadataScalar,
    ProfileRequest,
    RecordTemplate,
    SearchReply,
    SearchRequest,
    SearchType,
    StatsRequest,
    TransformerKind,
)
from kbus_contract.catalog import channel
from kbus_contract.lanes import Lane
from kbus_contract.tenancy import grant_token
from kbus_contract.topology import Topology
from kbus_contract.wire import (
    DEFAULT_WAIT_S,
    budget_ms,
    describe_validation_error,
    request,
)
from nats.aio.client import Client
from opentelemetry import trace
from pydantic import BaseModel, ValidationError

from kbus_client.agents import AgentTools
from kbus_client.bodies import ClaimChecks
from kbus_client.msgids import MessageIds
from kbus_client.publishing import Publisher, new_document
from kbus_client.reads import LibraryReads
from kbus_client.receipts import ReceiptWatcher, removal_of
from kbus_client.results import PublishResult
from kbus_client.retrying import ASK_AGAIN, Retry, with_retries
from kbus_client.spans import reply_attributes, search_attributes
from kbus_client.syncing import LibrarySyncs

R = TypeVar("R", bound=BaseModel)

_tracer = trace.get_tracer("kbus.client")


class KbClient(LibraryReads, LibrarySyncs, AgentTools):
    """A connection to one kbus installation (one bus prefix), optionally for one tenant.

    ``granted`` names the libraries the credential may reach when it may reach only some of its
    tenant's (the operator says which, with the credential): searches and statistics go to the
    grant's subject, receipts are read library by library. Without it the credential reaches
    the whole tenant.
    """

    def __init__(
        self,
        nc: Client,
        *,
        prefix: str = "",
        tenant: str | None = None,
        granted: Sequence[str] | None = None,
        acts_for: Sequence[str] | None = (),
        timeout_s: float = DEFAULT_WAIT_S,
        claim_check_bytes: int | None = None,
        retry: Retry | None = ASK_AGAIN,
    ) -> None:
        self.nc = nc
        self.topology = Topology(prefix)
        self.tenant = tenant
        self.granted = tuple(sorted(granted)) if granted is not None else None
        self.grant = grant_token(self.granted, acts_for)
        self.timeout_s = timeout_s
        self.retry = retry
        self._bodies = ClaimChecks(nc, self.topology, claim_check_bytes)
        # Only a publisher waits for receipts: it may hear those of restricted documents.
        self._receipts = ReceiptWatcher(
            nc, self.topology, self.granted, partial(self._ask_feed, restricted=True)
        )
        self._ids = MessageIds()
        self._publisher = Publisher(nc, self.topology, self._bodies, self._receipts, self._ids)

    @property
    def claim_check_bytes(self) -> int | None:
        """Documents whose message would be larger go by claim check (default: the server's
        message limit less room for headers)."""
        return self._bodies.limit_bytes

    @claim_check_bytes.setter
    def claim_check_bytes(self, limit: int | None) -> None:
        self._bodies.limit_bytes = limit

    @classmethod
    async def connect(
        cls,
        url: str = "nats://127.0.0.1:4222",
        *,
        prefix: str = "",
        tenant: str | None = None,
        granted: Sequence[str] | None = None,
        acts_for: Sequence[str] | None = (),
        timeout_s: float = DEFAULT_WAIT_S,
        retry: Retry | None = ASK_AGAIN,
        **nats_options: Any,
    ) -> KbClient:
        """Connect to NATS; ``nats_options`` go to ``nats.connect`` (the credential's user and
        password and its inbox prefix, TLS, ...). ``retry=None`` sends every request once.
        ``acts_for``: the principals the credential may claim (None: anyone), as its operator
        issued it."""
        # Several servers (a cluster's) may be given, separated by commas.
        nc = await nats.connect([u.strip() for u in url.split(",")], **nats_options)
        return cls(
            nc,
            prefix=prefix,
            tenant=tenant,
            granted=granted,
            acts_for=acts_for,
            timeout_s=timeout_s,
            retry=retry,
        )

    async def close(self) -> None:
        await self._receipts.stop()
        await self.nc.drain()

    async def __aenter__(self) -> KbClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def tenant_for(self, tenant: str | None = None) -> str:
        """The tenant a call acts for: the one it names, else the client's."""
        chosen = tenant or self.tenant
        if not chosen:
            raise ValueError("no tenant: pass tenant= here or to the client")
        return chosen

    async def publish_document(
        self,
        *,
        library: str,
        document_id: str,
        title: str = "",
        text: str = "",
        data: bytes | None = None,
        url: str | None = None,
        template: RecordTemplate | dict[str, Any] | None = None,
        tenant: str | None = None,
        source_uri: str = "",
        content_type: ContentType | str = ContentType.PLAIN,
        metadata: dict[str, Any] | None = None,
        version: str | None = None,
        chunks: Sequence[str] | None = None,
        matching: Sequence[Sequence[str]] | None = None,
        source: str | None = None,
        access: Sequence[str] | None = None,
        wait: bool = False,
        timeout_s: float = 300.0,
        interactive: bool = False,
    ) -> PublishResult:
        """Publish a document; with ``wait``, return once it is searchable.

        ``interactive``: a person waits for this one (an edit): every stage takes it before
        the tenant's bulk work (an import), which still waits its turn with other tenants'.

        The document is ``text``, or a file's ``data`` as it is (PDF, Office, HTML, CSV...,
        named by ``content_type``; it travels by claim check and the ingestor parses it), or a
        web page's ``url`` that the ingestor fetches. CSV and JSON records need a ``template``.
        Or it is the publisher's own ``chunks`` (indexed as given), each with the texts in
        ``matching`` that find it besides its own (questions, a description). ``source``: the
        source that owns it (:meth:`sync_library`); ``access``: who may read it (users and
        groups; unset: everyone who may read the library).

        An identical publish of the same document right after this client's last one is
        dropped by JetStream and comes back with ``duplicate=True`` and no receipt; not after
        this client deleted it (:mod:`kbus_client.msgids`).

        Raises:
            ValueError: the document is invalid (checked before it is sent).
            DocumentRejectedError: kbus dead-lettered it (``wait`` only).
            TimeoutError: no receipt within ``timeout_s`` (``wait`` only).
        """
        doc = self.new_document(
            tenant=tenant,
            library=library,
            document_id=document_id,
            title=title,
            text=text,
            data=data,
            url=url,
            template=template,
            source_uri=source_uri,
            content_type=content_type,
            metadata=metadata,
            version=version,
            chunks=chunks,
            matching=matching,
            source=source,
            access=access,
        )
        return await self.publish(
            doc, data, wait=wait, timeout_s=timeout_s, interactive=interactive
        )

    async def publish(
        self,
        doc: DocumentAdded,
        data: bytes | None = None,
        *,
        wait: bool = False,
        timeout_s: float = 300.0,
        interactive: bool = False,
    ) -> PublishResult:
        """Publish a document :meth:`new_document` made (``data``: its file's bytes)."""
        lane = Lane.INTERACTIVE if interactive else Lane.BULK
        return await self._publisher.publish(doc, wait, timeout_s, data, lane)

    def new_document(
        self,
        *,
        tenant: str | None = None,
        data: bytes | None = None,
        chunks: Sequence[str] | None = None,
        matching: Sequence[Sequence[str]] | None = None,
        access: Sequence[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **fields: Any,
    ) -> DocumentAdded:
        """The document :meth:`publish_document` would send (a file's ``data`` named by its
        claim check, not yet stored), or ``ValueError`` saying what is wrong with it."""
        chosen = self.tenant_for(tenant)
        fields = {"title": "", "text": "", **fields}
        return new_document(
            tenant=chosen,
            body=self._bodies.file_ref(chosen, fields["library"], fields["document_id"], data),
            metadata=metadata or {},
            chunks=tuple(chunks) if chunks is not None else None,
            matching=tuple(tuple(m) for m in matching) if matching is not None else None,
            access=tuple(access) if access is not None else None,
            **fields,
        )

    async def delete_document(
        self,
        *,
        library: str | None = None,
        document_id: str | None = None,
        tenant: str | None = None,
        wait: bool = False,
        timeout_s: float = 120.0,
    ) -> DocumentRemoved | None:
        """Delete a document, a whole library (no ``document_id``) or the whole tenant (neither).

        Everything published before the deletion goes; a later publish is indexed again. With
        ``wait``, returns the receipt saying how many chunks were removed.
        """
        try:
            deletion = DocumentDeleted(
                tenant=self.tenant_for(tenant), library=library, document_id=document_id
            )
        except ValidationError as exc:
            raise ValueError(describe_validation_error(exc)) from exc
        async with removal_of(self.nc, self.topology, deletion, listen=wait) as done:
            await self.nc.jetstream().publish(
                self.topology.deleted(deletion.tenant, deletion.library),
                deletion.model_dump_json().encode(),
                headers={"content-type": "application/json"},
            )
            self._ids.deleted(deletion.tenant, deletion.library, deletion.document_id)
            return await asyncio.wait_for(done, timeout_s) if wait else None

    async def search(
        self,
        query: str,
        *,
        libraries: list[str] | tuple[str, ...],
        tenant: str | None = None,
        k: int | None = None,
        search_type: SearchType | str = SearchType.HYBRID,
        alpha: float | None = None,
        min_score: float | None = None,
        min_similarity: float | None = None,
        min_evidence: float | None = None,
        rewrite: bool | None = None,
        transformer: TransformerKind | str | None = None,
        rerank: bool | None = None,
        rerank_depth: int | None = None,
        filters: dict[str, MetadataScalar | tuple[MetadataScalar, ...]] | None = None,
        group_by_document: bool = False,
        exclude_documents: tuple[str, ...] = (),
        principals: Sequence[str] = (),
        timeout_s: float | None = None,
        budget_tokens: int | None = None,
        expand: Expand | str = Expand.NONE,
        adaptive: bool = False,
        cursor: str | None = None,
    ) -> SearchReply:
        """Search and return the typed reply; an error reply raises :class:`KbError`.

        ``k`` and the other unset choices are the server's defaults. With ``budget_tokens``
        the reply's ``context`` holds passages that fill it (``expand``: what each holds around
        its hit; ``adaptive``: as many as score well; ``cursor``: the next page of the same
        search). ``principals``: the user and groups of the person the caller acts for (within
        what its credential may claim): documents with access show only to them. The search
        is given
        ``timeout_s`` (the client's default wait if unset) less the time its reply takes to
        come back: the searcher stops, or answers degraded, within it.
        """
        wait_s = timeout_s or self.timeout_s
        try:
            asked = SearchRequest(
                tenant=self.tenant_for(tenant),
                libraries=tuple(libraries),
                query=query,
                k=k,
                search_type=SearchType(search_type),
                alpha=alpha,
                min_score=min_score,
                min_similarity=min_similarity,
                min_evidence=min_evidence,
                rewrite=rewrite,
                transformer=TransformerKind(transformer) if transformer else None,
                rerank=rerank,
                rerank_depth=rerank_depth,
                filters=filters or {},
                group_by_document=group_by_document,
                exclude_documents=exclude_documents,
                principals=tuple(principals),
                budget_ms=budget_ms(wait_s),
                budget_tokens=budget_tokens,
                expand=Expand(expand),
                adaptive=adaptive,
                cursor=cursor,
            )
        except ValidationError as exc:
            raise ValueError(describe_validation_error(exc)) from exc
        with _tracer.start_as_current_span(
            "kbus search", attributes=search_attributes(asked)
        ) as span:
            reply = await self._ask("kb.search", asked, SearchReply, wait_s)
            span.set_attributes(reply_attributes(reply))
            return reply

    async def _ask(
        self,
        name: str,
        asked: SearchRequest | StatsRequest | ProfileRequest | FeedRequest,
        reply: type[R],
        timeout_s: float | None = None,
        restricted: bool = False,
    ) -> R:
        """A request on catalog channel ``name``, the asked tenant's subject within this
        client's grant (its form for restricted documents with ``restricted``); its errors name
        the service that answers it. Asked again after a retryable error while ``timeout_s``
        allows (:mod:`kbus_client.retrying`), each try with what is left of the budget; a reply
        with a ``tries`` field says how many it took."""
        subject = self.topology.asked(name, asked.tenant, self.grant, restricted)
        stage = channel(name).receiver

        async def attempt(left_s: float) -> R:
            sent = asked
            if getattr(asked, "budget_ms", None) is not None:
                sent = asked.model_copy(update={"budget_ms": budget_ms(left_s)})
            return await request(self.nc, subject, sent, reply, stage=stage, timeout_s=left_s)

        answer, tries = await with_retries(attempt, timeout_s or self.timeout_s, self.retry)
        if "tries" in reply.model_fields:
            answer = answer.model_copy(update={"tries": tries})
        return answer
