"""The async client: publish documents, wait for receipts, search, and give an agent a
memory and retrieval as a tool. What it does is split by role: the connection
(:mod:`.connection`), writes (:mod:`.documents`), reads (:mod:`.reads`), syncs
(:mod:`.syncing`); searching and what an agent gets are here."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Unpack

import nats
from kbus_contract import (
    SearchReply,
    SearchRequest,
)
from kbus_contract.wire import DEFAULT_WAIT_S, budget_ms, describe_validation_error
from opentelemetry import trace
from pydantic import ValidationError

from kbus_client.credentials import CredentialFile
from kbus_client.interruptions import Interruptions
from kbus_client.memory import Memory
from kbus_client.reads import LibraryReads
from kbus_client.retrying import ASK_AGAIN, Retry
from kbus_client.spans import reply_attributes, search_attributes
from kbus_client.surface import SearchOptions
from kbus_client.syncing import LibrarySyncs
from kbus_client.tool import KbTool, scoped_tool

_tracer = trace.get_tracer("kbus.client")

log = logging.getLogger("kbus.client")


#: The NATS server a client, the CLI and the tools reach when none is named (``make up``'s).
DEFAULT_URL = "nats://127.0.0.1:4222"


class KbClient(LibrarySyncs, LibraryReads):
    """A connection to one kbus installation (one bus prefix), optionally for one tenant.

    ``granted`` names the libraries the credential may reach when it may reach only some of its
    tenant's (the operator says which, with the credential): searches and statistics go to the
    grant's subject, receipts are read library by library. Without it the credential reaches
    the whole tenant.
    """

    @classmethod
    async def connect(
        cls,
        url: str = DEFAULT_URL,
        *,
        prefix: str = "",
        tenant: str | None = None,
        granted: Sequence[str] | None = None,
        acts_for: Sequence[str] | None = (),
        timeout_s: float = DEFAULT_WAIT_S,
        retry: Retry | None = ASK_AGAIN,
        credential: CredentialFile | None = None,
        **nats_options: Any,
    ) -> KbClient:
        """Connect to NATS; ``nats_options`` go to ``nats.connect`` (TLS, ...). With a
        ``credential`` (:meth:`CredentialFile.read`), its user connects, and the tenant,
        libraries, principals and bus prefix it names win over the arguments. ``retry=None``
        sends every request once.
        ``acts_for``: the principals the credential may claim (None: anyone), as its operator
        issued it."""
        held = None
        if credential is not None:
            prefix, tenant = credential.bus_prefix, credential.tenant
            granted, acts_for = credential.libraries, credential.acts_for
            held = credential.held()
            nats_options.update(credential.nats_options(held))
        # A connection error is one line in the log, not a traceback per server tried.
        told = nats_options.pop("error_cb", _log_briefly)
        back = nats_options.pop("reconnected_cb", None)
        interruptions = Interruptions()

        async def on_error(exc: Exception) -> None:
            interruptions.heard(exc)  # a request the bus refused ends at once, as a refusal
            await told(exc)

        async def on_reconnect() -> None:
            interruptions.reconnected()  # a request lost with the connection: asked again now
            if back is not None:
                await back()

        # Several servers (a cluster's) may be given, separated by commas.
        nc = await nats.connect(
            [u.strip() for u in url.split(",")],
            error_cb=on_error,
            reconnected_cb=on_reconnect,
            **nats_options,
        )
        client = cls(
            nc,
            interruptions=interruptions,
            prefix=prefix,
            tenant=tenant,
            granted=granted,
            acts_for=acts_for,
            timeout_s=timeout_s,
            retry=retry,
        )
        if held is not None:  # moved to each renewal of the credential's JWT before it ends
            client.keep_current(held)
        return client

    async def search(
        self,
        query: str,
        *,
        libraries: list[str] | tuple[str, ...],
        tenant: str | None = None,
        timeout_s: float | None = None,
        **options: Unpack[SearchOptions],
    ) -> SearchReply:
        """Search and return the typed reply; an error reply raises :class:`KbError`, a choice
        that is not valid ``ValueError`` naming it.

        ``options`` (:class:`SearchOptions`) unset are the server's defaults. With
        ``budget_tokens`` the reply's ``context`` holds passages that fill it (``expand``: what
        each holds around its hit; ``adaptive``: as many as score well; ``cursor``: the next
        page of the same search). ``principals``: the user and groups of the person the caller
        acts for (within what its credential may claim): documents with access show only to
        them. The search is given ``timeout_s`` (the client's default wait if unset) less the
        time its reply takes to come back: the searcher stops, or answers degraded, within it.
        """
        wait_s = timeout_s or self.timeout_s
        chosen = {name: value for name, value in options.items() if value is not None}
        try:
            asked = SearchRequest.model_validate(
                {
                    **chosen,
                    "tenant": self.tenant_for(tenant),
                    "libraries": tuple(libraries),
                    "query": query,
                    "budget_ms": budget_ms(wait_s),
                }
            )
        except ValidationError as exc:
            raise ValueError(describe_validation_error(exc)) from exc
        with _tracer.start_as_current_span(
            "kbus search", attributes=search_attributes(asked)
        ) as span:
            reply = await self._ask("kb.search", asked, SearchReply, wait_s)
            span.set_attributes(reply_attributes(reply))
            return reply

    def memory(
        self,
        library: str,
        *,
        conversation: str,
        source: str = "agent",
        tenant: str | None = None,
        principals: Sequence[str] = (),
    ) -> Memory:
        """What an agent learns, kept as documents of ``library`` (one its credential may
        write), marked with the conversation, the time and the source; with ``principals``,
        readable by them only."""
        return Memory(
            self,
            library,
            conversation,
            source,
            self.tenant_for(tenant),
            tuple(principals),
        )

    def as_tool(self, *, libraries: list[str] | tuple[str, ...], **options: Any) -> KbTool:
        """Retrieval as a tool for function calling, scoped to these libraries; ``options`` are
        :func:`kbus_client.tool.scoped_tool`'s (name, tenant, k, description, write,
        principals, ...)."""
        return scoped_tool(self, libraries=libraries, **options)


async def _log_briefly(exc: Exception) -> None:
    log.warning("nats: %s", exc or type(exc).__name__)
