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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from kbus_contract import ErrorReply
from kbus_contract.catalog import channel
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
    """A request as it arrived: its body, its subject, and when it was handed over."""

    body: bytes
    subject: str
    received: float = field(default_factory=time.monotonic)

    def deadline(self, budget_ms: int | None, default_ms: int | None = None) -> Deadline | None:
        """When its caller stops waiting: ``budget_ms`` (else ``default_ms``) from receipt."""
        chosen = budget_ms if budget_ms is not None else default_ms
        return None if chosen is None else Deadline.after(chosen, self.received)


#: Answers one request with a reply model (an error reply for any failure).
Answer = Callable[[Inbound], Awaitable[BaseModel]]


class Answering:
    """Answers requests side by side, at most ``limit`` at once.

    nats-py runs a subscription's callbacks one after another, so a callback that answered in
    place would hold every other request while one waits (for the embedder, Weaviate, a model
    or a remote API). The callback only takes a slot and starts the answer; when every slot is
    taken it waits, and later requests wait in the subscription.
    """

    def __init__(self, limit: int) -> None:
        self._slots = asyncio.Semaphore(limit)
        self._running: set[asyncio.Task[None]] = set()

    def responder(self, name: str, answer: Answer) -> Handler:
        """The endpoint handler for ``answer`` (its span is named ``name``)."""

        async def respond(request: Request) -> None:
            # Received before waiting for a slot: that wait is spent of the caller's budget.
            inbound = Inbound(request.data, request.subject)
            await self._slots.acquire()
            task = asyncio.create_task(self._respond(name, answer, request, inbound))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

        return respond

    async def _respond(self, name: str, answer: Answer, request: Request, inbound: Inbound) -> None:
        try:
            with answering_span(name, request.subject, request.headers) as span:
                reply = await answer(inbound)
                if isinstance(reply, ErrorReply):
                    failed(span, reply.error.code, reply.error.message)
            # No headers: the subject's contract says JSON, and nats-py parses any header
            # block with the email package on every message it receives.
            await request.respond(reply.model_dump_json().encode())
        except Exception:
            # `answer` turns failures into error replies; this is the reply itself failing.
            log.exception("could not send a reply on %s", request.subject)
        finally:
            self._slots.release()

    async def drain(self) -> None:
        """Wait for the answers being worked on."""
        if self._running:
            await asyncio.wait(set(self._running))


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
) -> Served:
    """Serve catalog subjects (``"kb.search"``, ...) as one micro service in their queue group.

    The service's name and queue group come from the catalog; replicas share the queue group,
    so each request is answered once. Up to ``concurrency`` requests are answered at once.
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
    answering = Answering(concurrency)
    for entry, answer in zip(entries, endpoints.values(), strict=True):
        await service.add_endpoint(
            name=entry.name.removeprefix("kb."),
            subject=topology.every(entry.name),
            handler=answering.responder(entry.name, answer),
            metadata={
                "request_schema": entry.request_schema(),
                "response_schema": entry.reply_schema(),
            },
        )
    return Served(service, answering)
