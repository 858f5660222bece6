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
from kbus_contract.errors import ErrorCode, TransientError
from kbus_contract.intake import refused
from kbus_contract.topology import Topology
from nats.aio.client import Client
from nats.micro import add_service
from nats.micro.request import Handler, Request
from nats.micro.service import Service
from pydantic import BaseModel

from kbus_runtime.deadlines import Deadline
from kbus_runtime.fair_share import Stride
from kbus_runtime.tracing import answering_span, failed

log = logging.getLogger("kbus")


@dataclass
class Work:
    """What a request costs (:mod:`kbus_contract.work`'s unit for its kind): estimated from
    the request before it is answered, measured by its answer where it can say."""

    estimate: float = 1.0
    measured: float | None = None

    @property
    def charged(self) -> float:
        return self.estimate if self.measured is None else self.measured


@dataclass(frozen=True)
class Inbound:
    """A request as it arrived: its body, its subject, its headers, when it was handed over,
    and what it costs."""

    body: bytes
    subject: str
    received: float = field(default_factory=time.monotonic)
    headers: Mapping[str, str] = field(default_factory=dict)
    work: Work = field(default_factory=Work)

    def deadline(self, budget_ms: int | None, default_ms: int | None = None) -> Deadline | None:
        """When its caller stops waiting: ``budget_ms`` (else ``default_ms``) from receipt."""
        chosen = budget_ms if budget_ms is not None else default_ms
        return None if chosen is None else Deadline.after(chosen, self.received)


#: Answers one request with a reply model (an error reply for any failure).
Answer = Callable[[Inbound], Awaitable[BaseModel]]
#: What a request costs before it is answered (its body and subject are all there is); it may
#: refuse the request at once, raising the ``TransientError`` its caller is answered with (a
#: tenant past a budget of work: refused before it waits for a slot, at next to no cost).
Price = Callable[[Inbound], float]
#: A tenant's requests one replica keeps waiting, at most, per slot it has.
WAITING = 4
#: Refusals a replica answers one tenant in a second, at most: past them, its requests that
#: second go unanswered (each answer costs the replica a write; a tenant asking again at once,
#: ignoring when it was told to, must not spend the replica's time on answers).
REFUSALS_ANSWERED = 64
#: An endpoint's answer, as bytes, refusing a tenant over its share (the sentence given, and
#: when to ask again).
Refusal = Callable[[str, float | None], bytes]


@dataclass(frozen=True)
class Priced:
    """An answer and what its requests cost."""

    answer: Answer
    price: Price


def one_each(_: Inbound) -> float:
    """The price of a request whose cost does not depend on what it asks."""
    return 1.0


def by_size(unit: int) -> Price:
    """The price of a request whose cost grows with its size: one per ``unit`` bytes."""

    def price(inbound: Inbound) -> float:
        return max(1.0, len(inbound.body) / unit)

    return price


def refusal_of(entry: Channel) -> Refusal:
    """How an endpoint refuses a tenant over its share: as the gate answers (JetStream's
    error) for what tenants send into the streams, else as every kbus request's error reply."""

    def refuse(message: str, retry_after_s: float | None = None) -> bytes:
        if entry.gated:
            return refused(ErrorCode.QUOTA_EXCEEDED, message).model_dump_json().encode()
        info = ErrorInfo(
            code=ErrorCode.QUOTA_EXCEEDED,
            message=message,
            stage=entry.receiver,
            retryable=True,
            retry_after_s=retry_after_s,
        )
        return ErrorReply(error=info).model_dump_json().encode()

    return refuse


@dataclass
class _Job:
    run: Callable[[], Coroutine[Any, Any, None]]
    work: Work


class Answering:
    """Answers requests side by side, at most ``limit`` at once, the tenants with requests
    waiting in turn, charged in what each request costs.

    nats-py runs a subscription's callbacks one after another, so a callback that answered in
    place would hold every other request while one waits (for the embedder, Weaviate, a model
    or a remote API). The callback only puts the request in its tenant's queue, priced
    (:data:`Price`); a free slot takes the next request of the tenant whose turn it is
    (:class:`~kbus_runtime.fair_share.Stride`: a costly request takes as many turns as it costs,
    corrected by what it measured once answered), so a tenant with many or costly requests
    waiting delays another's cheap one by one request at most. A tenant holds at most its
    ``per_tenant`` budget of slots (none set: a quarter of them) and its ``work_in_flight``
    of work (none set: no bound; a request costing more runs alone), and at most
    :data:`WAITING` times the replica's slots waiting; past that its requests are refused
    ``quota_exceeded`` at once. A request between kbus's services names no tenant and is never
    refused.
    """

    def __init__(
        self,
        limit: int,
        topology: Topology,
        per_tenant: Callable[[str], int | None] | None = None,
        work_in_flight: Callable[[str], float | None] | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        self._limit = limit
        self._free = limit
        self._topology = topology
        self._per_tenant = per_tenant or (lambda tenant: None)
        self._work_in_flight = work_in_flight or (lambda tenant: None)
        self._turns = Stride(weights)
        self._waiting: dict[str, deque[_Job]] = {}
        self._busy: dict[str, int] = {}
        self._held: dict[str, float] = {}
        #: Whether a tenant's requests here are its own (else kbus's on its behalf).
        self._sent: dict[str, bool] = {}
        #: Refusals answered this second, by tenant.
        self._refused: dict[str, tuple[int, int]] = {}
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

    def responder(
        self, name: str, answer: Answer, refusal: Refusal, price: Price = one_each
    ) -> Handler:
        """The endpoint handler for ``answer`` (its span is named ``name``; ``refusal``: the
        endpoint's answer to a tenant over its budget; ``price``: what a request costs)."""

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
                await self._refuse(request, tenant, refusal(message, 1.0))
                return
            try:
                inbound.work.estimate = price(inbound)
            except TransientError as exc:
                await self._refuse(request, tenant, refusal(exc.reason, exc.retry_after_s))
                return
            if not queue and not self._busy.get(tenant):
                self._turns.join(tenant)
            job = _Job(lambda: self._answer(name, answer, request, inbound), inbound.work)
            queue.append(job)
            self._idle.clear()
            self._dispatch()

        return respond

    def _share(self, tenant: str) -> int:
        return self.share(tenant, self._sent.get(tenant, True))

    async def _refuse(self, request: Request, tenant: str, answer: bytes) -> None:
        """Answer a refusal, unless the tenant was refused :data:`REFUSALS_ANSWERED` times
        this second already (then its caller hears nothing: it was told when to ask again)."""
        second = int(time.monotonic())
        at, count = self._refused.get(tenant, (second, 0))
        count = count + 1 if at == second else 1
        self._refused[tenant] = (second, count)
        if len(self._refused) > 4 * REFUSALS_ANSWERED:
            self._refused = {t: v for t, v in self._refused.items() if v[0] == second}
        if count <= REFUSALS_ANSWERED:
            await _respond(request, answer)

    def _may_start(self, tenant: str, job: _Job) -> bool:
        """Whether a tenant's next request may start: within its slots, and within its work in
        flight (or alone)."""
        if self._busy.get(tenant, 0) >= self._share(tenant):
            return False
        held = self._held.get(tenant, 0.0)
        bound = self._work_in_flight(tenant) if tenant and self._sent.get(tenant, True) else None
        return held <= 0 or bound is None or held + job.work.estimate <= bound

    def _dispatch(self) -> None:
        """Start the next waiting request of the tenant whose turn it is while slots are free."""
        while self._free:
            ready = [t for t, q in self._waiting.items() if q and self._may_start(t, q[0])]
            tenant = self._turns.next(ready)
            if tenant is None:
                return
            job = self._waiting[tenant].popleft()
            self._turns.charge(tenant, job.work.estimate)
            self._free -= 1
            self._busy[tenant] = self._busy.get(tenant, 0) + 1
            self._held[tenant] = self._held.get(tenant, 0.0) + job.work.estimate
            task = asyncio.create_task(job.run())
            self._running.add(task)
            task.add_done_callback(partial(self._done, tenant=tenant, work=job.work))

    def _done(self, task: asyncio.Task[None], *, tenant: str, work: Work) -> None:
        self._running.discard(task)
        self._free += 1
        self._busy[tenant] -= 1
        self._held[tenant] -= work.estimate
        # Charged what it cost, where its answer measured it.
        self._turns.correct(tenant, work.charged - work.estimate)
        if not self._waiting.get(tenant):
            self._waiting.pop(tenant, None)
            if not self._busy[tenant]:
                del self._busy[tenant]
                del self._held[tenant]
                self._sent.pop(tenant, None)
                self._turns.sweep(self._waiting)
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
    endpoints: Mapping[str, Answer | Priced],
    *,
    version: str,
    description: str,
    concurrency: int,
    per_tenant: Callable[[str], int | None] | None = None,
    work_in_flight: Callable[[str], float | None] | None = None,
    weights: Mapping[str, float] | None = None,
) -> Served:
    """Serve catalog subjects (``"kb.search"``, ...) as one micro service in their queue group.

    The service's name and queue group come from the catalog; replicas share the queue group,
    so each request is answered once. Up to ``concurrency`` requests are answered at once, of
    one tenant's ``per_tenant(tenant)`` (default: a quarter of them) holding at most
    ``work_in_flight(tenant)`` of work; an endpoint given as :class:`Priced` charges each
    request its price, another one each.
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
    answering = Answering(concurrency, topology, per_tenant, work_in_flight, weights)
    for entry, endpoint in zip(entries, endpoints.values(), strict=True):
        priced = endpoint if isinstance(endpoint, Priced) else Priced(endpoint, one_each)
        await service.add_endpoint(
            name=entry.name.removeprefix("kb.").replace(".", "-"),
            subject=topology.every(entry.name),
            handler=answering.responder(entry.name, priced.answer, refusal_of(entry), priced.price),
            metadata={
                "request_schema": entry.request_schema(),
                "response_schema": entry.reply_schema(),
            },
        )
    return Served(service, answering)
