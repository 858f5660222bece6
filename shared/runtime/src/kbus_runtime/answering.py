"""Request-reply subjects served as NATS micro services, several requests at once.

``kb.search``, ``kb.stats``, ``kb.embed`` and ``kb.rerank`` are answered through nats-py's
micro services rather than FastStream subscribers: standard tooling lists them
(``nats micro ls``, ``$SRV.PING/INFO/STATS``), and a request skips FastStream's per-message
path (docs/tuning.md, "Requests as NATS micro services").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kbus_contract import ErrorInfo, ErrorReply
from kbus_contract.catalog import Channel, channel
from kbus_contract.errors import ErrorCode
from kbus_contract.intake import refused
from kbus_contract.topology import Topology
from nats.aio.client import Client
from nats.micro import add_service
from nats.micro.request import Handler, Request
from nats.micro.service import Service
from pydantic import BaseModel

from kbus_runtime.deadlines import Deadline
from kbus_runtime.tracing import answering_span, failed

log = logging.getLogger("kbus")


@dataclass(frozen=True)
class Inbound:
    """A request as it arrived: its body, its subject, its headers, and when it was handed
    over."""

    body: bytes
    subject: str
    received: float = field(default_factory=time.monotonic)
    headers: Mapping[str, str] = field(default_factory=dict)

    def deadline(self, budget_ms: int | None, default_ms: int | None = None) -> Deadline | None:
        """When its caller stops waiting: ``budget_ms`` (else ``default_ms``) from receipt."""
        chosen = budget_ms if budget_ms is not None else default_ms
        return None if chosen is None else Deadline.after(chosen, self.received)


#: Answers one request with a reply model (an error reply for any failure).
Answer = Callable[[Inbound], Awaitable[BaseModel]]
#: A tenant's requests one replica keeps waiting, at most, per slot it has.
WAITING = 4
#: An endpoint's answer, as bytes, refusing a tenant over its share (the sentence given).
Refusal = Callable[[str], bytes]


def refusal_of(entry: Channel) -> Refusal:
    """How an endpoint refuses a tenant over its share: as the gate answers (JetStream's
    error) for what tenants send into the streams, else as every kbus request's error reply."""

    def refuse(message: str) -> bytes:
        if entry.gated:
            return refused(ErrorCode.QUOTA_EXCEEDED, message).model_dump_json().encode()
        info = ErrorInfo(
            code=ErrorCode.QUOTA_EXCEEDED, message=message, stage=entry.receiver, retryable=True
        )
        return ErrorReply(error=info).model_dump_json().encode()

    return refuse


class Answering:
    """Answers requests side by side, at most ``limit`` at once, the tenants with requests
    waiting in turn.

    nats-py runs a subscription's callbacks one after another, so a callback that answered in
    place would hold every other request while one waits (for the embedder, Weaviate, a model
    or a remote API). The callback only puts the request in its tenant's queue; a free slot
    takes the next request of the next tenant in turn, so a tenant with many requests waiting
    delays another's by one request at most. A tenant holds at most its ``per_tenant`` budget
    of slots (none set: any that are free) and at most :data:`WAITING` times the replica's
    slots waiting; past that its requests are refused ``quota_exceeded`` at once. A request
    between kbus's services names no tenant and is never refused.
    """

    def __init__(
        self,
        limit: int,
        topology: Topology,
        per_tenant: Callable[[str], int | None] | None = None,
    ) -> None:
        self._limit = limit
        self._free = limit
        self._topology = topology
        self._per_tenant = per_tenant or (lambda tenant: None)
        self._waiting: dict[str, deque[Callable[[], Coroutine[Any, Any, None]]]] = {}
        self._turns: deque[str] = deque()
        self._busy: dict[str, int] = {}
        #: Whether a tenant's requests here are its own (else kbus's on its behalf).
        self._sent: dict[str, bool] = {}
        self._running: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    def share(self, tenant: str, sent: bool = True) -> int:
        """How many of one tenant's requests are answered at once, at most: its budget, else a
        quarter of the slots for what tenants send (a tenant's heavy searches leave the store
        and the models room for another's), all of them for kbus's own asking on a tenant's
        behalf (which takes its turn all the same)."""
        if not tenant or not sent:
            return self._limit
        return self._per_tenant(tenant) or max(1, self._limit // 4)

    def responder(self, name: str, answer: Answer, refusal: Refusal) -> Handler:
        """The endpoint handler for ``answer`` (its span is named ``name``; ``refusal``: the
        endpoint's answer to a tenant over its budget)."""

        async def respond(request: Request) -> None:
            # Received before waiting for a slot: that wait is spent of the caller's budget.
            inbound = Inbound(request.data, request.subject, headers=request.headers or {})
            tenant, sent = self._topology.turn_of(request.subject)
            self._sent[tenant] = sent
            queue = self._waiting.setdefault(tenant, deque())
            if tenant and sent and len(queue) >= WAITING * self._limit:
                message = (
                    f"tenant {tenant!r} has {len(queue)} requests waiting here, past its "
                    f"budget of {WAITING * self._limit} waiting (and {self._share(tenant)} "
                    "answered at once, requests_in_flight): ask again when some are answered"
                )
                await _respond(request, refusal(message))
                return
            queue.append(lambda: self._answer(name, answer, request, inbound))
            if tenant not in self._turns and self._busy.get(tenant, 0) < self._share(tenant):
                self._turns.append(tenant)
            self._idle.clear()
            self._dispatch()

        return respond

    def _share(self, tenant: str) -> int:
        return self.share(tenant, self._sent.get(tenant, True))

    def _dispatch(self) -> None:
        """Start the next waiting request of each tenant in turn while slots are free."""
        while self._free and self._turns:
            tenant = self._turns.popleft()
            queue = self._waiting[tenant]
            job = queue.popleft()
            self._free -= 1
            self._busy[tenant] = self._busy.get(tenant, 0) + 1
            if queue and self._busy[tenant] < self._share(tenant):
                self._turns.append(tenant)
            task = asyncio.create_task(job())
            self._running.add(task)
            task.add_done_callback(partial(self._done, tenant=tenant))

    def _done(self, task: asyncio.Task[None], *, tenant: str) -> None:
        self._running.discard(task)
        self._free += 1
        self._busy[tenant] -= 1
        queue = self._waiting.get(tenant)
        if queue and tenant not in self._turns:
            self._turns.append(tenant)
        if not queue:
            self._waiting.pop(tenant, None)
            if not self._busy[tenant]:
                del self._busy[tenant]
                self._sent.pop(tenant, None)
        self._dispatch()
        if not self._running and not self._waiting:
            self._idle.set()

    async def _answer(self, name: str, answer: Answer, request: Request, inbound: Inbound) -> None:
        try:
            with answering_span(name, request.subject, request.headers) as span:
                reply = await answer(inbound)
                if isinstance(reply, ErrorReply):
                    failed(span, reply.error.code, reply.error.message)
            # No headers: the subject's contract says JSON, and nats-py parses any header
            # block with the email package on every message it receives.
            await _respond(request, reply.model_dump_json().encode())
        except Exception:
            # `answer` turns failures into error replies; this is the reply itself failing.
            log.exception("could not send a reply on %s", request.subject)

    async def drain(self) -> None:
        """Wait for the answers being worked on and those waiting."""
        await self._idle.wait()


async def _respond(request: Request, body: bytes) -> None:
    """Answer, where the sender waits for an answer (a plain publish asks for none)."""
    if request._msg.reply:
        await request.respond(body)


@dataclass
class Served:
    """A micro service and the answers it has running."""

    service: Service
    answering: Answering

    async def stop(self) -> None:
        """Stop taking requests, answer every request this replica was already given, then
        stop the service.

        nats-py's ``Service.stop`` unsubscribes the endpoints, dropping the requests waiting in
        their subscriptions (each caller then waits out its timeout). Their subscriptions, and
        the service's own (``$SRV``), are drained instead: the server sends no new requests,
        and the waiting ones reach the callback.
        """
        endpoints = [e._subscription for e in self.service._endpoints if e._subscription]
        for subscription in (*endpoints, *self.service._subscriptions.values()):
            await subscription.drain()
        await self.answering.drain()


async def serve(
    nc: Client,
    topology: Topology,
    endpoints: Mapping[str, Answer],
    *,
    version: str,
    description: str,
    concurrency: int,
    per_tenant: Callable[[str], int | None] | None = None,
) -> Served:
    """Serve catalog subjects (``"kb.search"``, ...) as one micro service in their queue group.

    The service's name and queue group come from the catalog; replicas share the queue group,
    so each request is answered once. Up to ``concurrency`` requests are answered at once, and
    of one tenant's ``per_tenant(tenant)`` (default: half of them).
    """
    entries = [channel(name) for name in endpoints]
    [(receiver, name)] = {(entry.receiver, entry.micro) for entry in entries}
    service = await add_service(
        nc,
        name=name,
        version=version,
        description=description,
        queue_group=receiver,
        metadata={"bus_prefix": topology.prefix},
    )
    answering = Answering(concurrency, topology, per_tenant)
    for entry, answer in zip(entries, endpoints.values(), strict=True):
        await service.add_endpoint(
            name=entry.name.removeprefix("kb.").replace(".", "-"),
            subject=topology.every(entry.name),
            handler=answering.responder(entry.name, answer, refusal_of(entry)),
            metadata={
                "request_schema": entry.request_schema(),
                "response_schema": entry.reply_schema(),
            },
        )
    return Served(service, answering)
