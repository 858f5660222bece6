"""What every call of a client stands on: the NATS connection, the bus's names, the tenant
a call acts for, and a request asked again while its budget allows."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial
from types import TracebackType
from typing import Self, TypeVar

from kbus_contract import (
    BacklogRequest,
    FeedReply,
    FeedRequest,
    ProfileRequest,
    SearchRequest,
    StatsRequest,
    VersionsRequest,
)
from kbus_contract.alongside import cancelled
from kbus_contract.catalog import channel
from kbus_contract.hedging import Hedger
from kbus_contract.renewing import HeldCredentials
from kbus_contract.tenancy import grant_token
from kbus_contract.topology import Topology
from kbus_contract.wire import DEFAULT_WAIT_S, budget_ms, request
from nats.aio.client import Client
from pydantic import BaseModel

from kbus_client.bodies import ClaimChecks
from kbus_client.interruptions import Interruptions
from kbus_client.msgids import MessageIds
from kbus_client.publishing import Publisher
from kbus_client.receipts import ReceiptWatcher
from kbus_client.retrying import ASK_AGAIN, Retry, with_retries

R = TypeVar("R", bound=BaseModel)


class Connection:
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
        interruptions: Interruptions | None = None,
    ) -> None:
        self.nc = nc
        #: The bus's refusals of this connection's requests and its reconnections
        #: (:meth:`KbClient.connect` hears them; on a connection made elsewhere a refused or
        #: lost request waits out its try).
        self.interruptions = interruptions or Interruptions()
        self.topology = Topology(prefix)
        self.tenant = tenant
        self.granted = tuple(sorted(granted)) if granted is not None else None
        self.grant = grant_token(self.granted, acts_for)
        self.timeout_s = timeout_s
        self.retry = retry
        hedge = retry.hedge if retry else None
        #: Late repeatable reads sent again (None: never), with the answer times it saw.
        self.hedger = Hedger(hedge) if hedge else None
        self._bodies = ClaimChecks(nc, self.topology, claim_check_bytes)
        # Only a publisher waits for receipts: it may hear those of restricted documents.
        self._receipts = ReceiptWatcher(
            nc, self.topology, self.granted, partial(self._ask_feed, restricted=True)
        )
        self._ids = MessageIds()
        self._publisher = Publisher(
            nc, self.topology, self._bodies, self._receipts, self._ids, self.interruptions
        )
        self._renewal: asyncio.Future[None] | None = None

    def keep_current(self, held: HeldCredentials) -> None:
        """Move the connection to each renewal of its credentials (read where ``held`` reads
        them) before its JWT ends, until closed."""
        self._renewal = asyncio.ensure_future(held.keep_current(self.nc))

    @property
    def claim_check_bytes(self) -> int | None:
        """Documents whose message would be larger go by claim check (default: the server's
        message limit less room for headers)."""
        return self._bodies.limit_bytes

    @claim_check_bytes.setter
    def claim_check_bytes(self, limit: int | None) -> None:
        self._bodies.limit_bytes = limit

    async def close(self) -> None:
        if self._renewal is not None:
            await cancelled(self._renewal)
        await self._receipts.stop()
        await self.nc.drain()

    async def __aenter__(self) -> Self:
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

    async def _ask(
        self,
        name: str,
        asked: SearchRequest
        | StatsRequest
        | ProfileRequest
        | FeedRequest
        | VersionsRequest
        | BacklogRequest,
        reply: type[R],
        timeout_s: float | None = None,
        restricted: bool = False,
    ) -> R:
        """A request on catalog channel ``name``, the asked tenant's subject within this
        client's grant (its form for restricted documents with ``restricted``); its errors name
        the service that answers it. Asked again after a retryable error while ``timeout_s``
        allows (:mod:`kbus_client.retrying`), each try with what is left of the budget, and a
        repeatable read also where a try is late (:mod:`kbus_contract.hedging`); a reply with a
        ``tries`` field says how many it took."""
        subject = self.topology.asked(name, asked.tenant, self.grant, restricted)
        stage = channel(name).receiver
        hedger = self.hedger if channel(name).repeatable else None

        async def once(left_s: float) -> R:
            sent = asked
            if getattr(asked, "budget_ms", None) is not None:
                sent = asked.model_copy(update={"budget_ms": budget_ms(left_s)})
            asking = request(self.nc, subject, sent, reply, stage=stage, timeout_s=left_s)
            return await self.interruptions.race(subject, stage, asking)

        async def attempt(left_s: float) -> R:
            return await (hedger.first(name, once, left_s) if hedger else once(left_s))

        answer, tries = await with_retries(attempt, timeout_s or self.timeout_s, self.retry)
        if "tries" in reply.model_fields:
            answer = answer.model_copy(update={"tries": tries})
        return answer

    async def _ask_feed(self, asked: FeedRequest, restricted: bool = False) -> FeedReply:
        return await self._ask("kb.feed", asked, FeedReply, restricted=restricted)
