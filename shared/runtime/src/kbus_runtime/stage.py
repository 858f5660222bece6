"""Where errors become acks, nacks, dead letters and error replies: the only place.

Stream consumers run with FastStream's ``AckPolicy.MANUAL`` and hand each message to
:meth:`Stage.settle`; request handlers hand theirs to :meth:`Stage.answer`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from kbus_contract import ErrorInfo, ErrorReply
from kbus_contract.catalog import channel
from kbus_contract.errors import ErrorCode, PermanentError, TransientError
from kbus_contract.hedging import HEDGE, Hedger
from kbus_contract.restricted import message_is_everyones
from kbus_contract.tenancy import UNKNOWN
from kbus_contract.topology import Topology
from kbus_contract.wire import PUBLISH_BOUND_S, decode, request, until_acknowledged
from kbus_contract.work import work_header
from nats.aio.client import Client
from pydantic import BaseModel

from kbus_runtime.budgets import Budgets, Resource
from kbus_runtime.dead_letters import failure_of, identity, letter_of
from kbus_runtime.redelivery import (
    HAND_BACK_S,
    OUTAGE_PATIENCE_S,
    Message,
    backoff_s,
    deliveries,
    kept_alive,
    stream_sequence,
    through_outages,
)
from kbus_runtime.stage_metrics import StageMetrics
from kbus_runtime.usage import Usage
from kbus_runtime.withdrawals import Withdrawals

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R", bound=BaseModel)

log = logging.getLogger("kbus")

#: Codes that refuse what a tenant may not do; counted per tenant.
REFUSALS = frozenset(
    {
        ErrorCode.TENANT_MISMATCH,
        ErrorCode.LIBRARY_MISMATCH,
        ErrorCode.LIBRARY_NOT_GRANTED,
        ErrorCode.QUOTA_EXCEEDED,
    }
)


class Bus(Protocol):
    """What a stage publishes and asks through (FastStream's ``NatsBroker``)."""

    @property
    def connection(self) -> Client: ...

    async def publish(
        self, message: bytes, subject: str, *, stream: str, headers: dict[str, str]
    ) -> Any: ...


@dataclass
class Stage:
    """One stage of the pipeline: its name, its bus and its metrics."""

    name: str
    broker: Bus
    topology: Topology
    metrics: StageMetrics
    #: Seconds a publish is re-sent for while its stream has no leader.
    publish_bound_s: float = PUBLISH_BOUND_S
    #: Set when the process is told to stop: messages not yet started are handed back.
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    #: The tenants' budgets, and what each holds (None: records kept without a bound).
    budgets: Budgets | None = None
    usage: Usage | None = None
    #: Seconds a message's last delivery waits in place for a dependency that is out.
    outage_patience_s: float = OUTAGE_PATIENCE_S
    #: What was deleted or published again since (None: every publish's work is done).
    withdrawals: Withdrawals | None = None
    #: The tenants with a message waiting in place here: one each, so a tenant whose messages
    #: fail as outages by themselves holds one of this stage's slots, not all of them.
    _waiting: set[str] = field(default_factory=set, init=False)
    #: The answer times of this process's requests to other stages, and its hedges.
    _hedger: Hedger = field(default_factory=lambda: Hedger(HEDGE), init=False)

    async def settle(
        self, message: Message, model: type[M], work: Callable[[M], Awaitable[None]]
    ) -> None:
        """Decode, process and acknowledge one stream message according to how it ended."""
        delivered = deliveries(message)
        if self.stopping.is_set():
            # Another replica takes it (after the pause, by when this one has stopped fetching).
            await message.nack(HAND_BACK_S)
            self.metrics.handed_back.labels(self.name).inc()
            return
        try:
            payload = decode(message.body, model)
            async with kept_alive(message, self.topology.ack_wait_s / 3):
                await self._through_outages(message, work, payload, delivered)
        except PermanentError as exc:
            await self._dead_letter(message, exc.code, exc.reason, delivered)
        except asyncio.CancelledError:
            await message.nack()
            raise
        except Exception as exc:
            await self._retry_or_give_up(message, exc, delivered)
        else:
            await message.ack()
            self.metrics.processed.labels(self.name).inc()

    async def wanted(self, tenant: str, library: str, document_id: str, sequence: int) -> bool:
        """Whether the work of a document's publish at ``sequence`` is still wanted (not
        deleted, not published again since); the work skipped is counted."""
        if self.withdrawals is None:
            return True
        reason = await self.withdrawals.reason(tenant, library, document_id, sequence)
        if reason is None:
            return True
        self.metrics.withdrawn.labels(self.name, reason.value).inc()
        log.info(
            "%s: skipping %s/%s (seq %d): %s", self.name, library, document_id, sequence, reason
        )
        return False

    async def answer(
        self,
        body: bytes,
        model: type[M],
        work: Callable[[M], Awaitable[R]],
        tenant: str | None = None,
    ) -> R | ErrorReply:
        """Decode and answer one request (for ``tenant``, where its subject names one); every
        failure becomes a typed error reply."""
        try:
            reply: R | ErrorReply = await work(decode(body, model))
        except (PermanentError, TransientError) as exc:
            after = exc.retry_after_s if isinstance(exc, TransientError) else None
            reply = self.error_reply(
                exc.code, self._relayed(exc), retryable=exc.retryable, retry_after_s=after
            )
        except Exception as exc:
            log.exception("%s: request failed", self.name)
            reply = self.error_reply(
                ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}", retryable=True
            )
        outcome = reply.error.code if isinstance(reply, ErrorReply) else "ok"
        self.metrics.answered.labels(self.name, outcome).inc()
        self._count_refusal(tenant, outcome)
        return reply

    def _count_refusal(self, tenant: str | None, code: str) -> None:
        if code in REFUSALS:
            self.metrics.refusals.labels(self.name, tenant or "_", code).inc()

    def _relayed(self, exc: PermanentError | TransientError) -> str:
        # An error another stage replied with keeps its origin in the message.
        if exc.stage and exc.stage != self.name:
            return f"{exc.stage}: {exc.reason}"
        return exc.reason

    def error_reply(
        self, code: str, message: str, *, retryable: bool, retry_after_s: float | None = None
    ) -> ErrorReply:
        """An error reply from this stage."""
        info = ErrorInfo(
            code=code,
            message=message,
            stage=self.name,
            retryable=retryable,
            retry_after_s=retry_after_s,
        )
        return ErrorReply(error=info)

    async def ask(
        self,
        subject: str,
        payload: BaseModel,
        reply_model: type[R],
        *,
        stage: str,
        timeout_s: float,
    ) -> R:
        """A request to another stage (``stage`` answers it): its reply, or the typed error.
        A repeatable one (the catalog says which) is sent again where it is late
        (:mod:`kbus_contract.hedging`)."""

        def once(left_s: float) -> Awaitable[R]:
            return request(
                self.broker.connection, subject, payload, reply_model, stage=stage, timeout_s=left_s
            )

        kind = self.topology.channel_of(subject)
        if kind and channel(kind).repeatable:
            return await self._hedger.first(kind, once, timeout_s)
        return await once(timeout_s)

    async def publish(
        self,
        model: BaseModel,
        subject: str,
        *,
        stream: str,
        msg_id: str | None = None,
        work: float | None = None,
    ) -> None:
        """Publish to a stream and wait for the server's acknowledgement that it is stored,
        sending it again while the stream has no leader (:func:`until_acknowledged`).

        With ``msg_id``, JetStream drops a second publish of the same id inside the stream's
        duplicate window; without one, the publish gets an id of its own, so that its own
        re-sends are dropped. ``work``: what the message costs the stage that takes it
        (:mod:`kbus_contract.work`).
        """
        headers = {
            "content-type": "application/json",
            "Nats-Msg-Id": msg_id or uuid.uuid4().hex,
            **(work_header(work) if work is not None else {}),
        }
        body = model.model_dump_json().encode()
        await until_acknowledged(
            lambda: self.broker.publish(body, subject, stream=stream, headers=headers),
            bound_s=self.publish_bound_s,
        )

    async def record(
        self,
        model: BaseModel,
        subject: str,
        *,
        stream: str,
        msg_id: str,
        tenant: str | None,
        budget: Resource,
    ) -> None:
        """Publish a record a tenant reads back (a receipt, a dead letter), keeping at most its
        ``budget`` of them in ``stream``: past it, its own oldest go first."""
        await self._make_room(stream, tenant or UNKNOWN, budget)
        await self.publish(model, subject, stream=stream, msg_id=msg_id)
        if self.usage is not None:
            self.usage.added(stream, self.topology.records_of(stream, tenant or UNKNOWN)[0])

    async def _make_room(self, stream: str, tenant: str, budget: Resource) -> None:
        if self.budgets is None or self.usage is None:
            return
        kept = self.budgets.of(tenant).count(budget)
        main, *others = self.topology.records_of(stream, tenant)
        held = [await self.usage.messages(stream, subject) for subject in (main, *others)]
        if sum(held) + 1 <= kept:
            return
        keep = max(0, kept - 1 - sum(held[1:]))
        js = self.broker.connection.jetstream()
        await js.purge_stream(stream, subject=main, keep=keep or None)
        self.usage.forget(stream, main)
        log.info("%s: tenant %s was past its %s; its oldest went", self.name, tenant, budget)

    async def _through_outages(
        self, message: Message, work: Callable[[M], Awaitable[None]], payload: M, delivered: int
    ) -> None:
        """``work``; on the message's last delivery, tried again in place while a dependency
        is out, up to ``outage_patience_s`` (:func:`~kbus_runtime.redelivery.through_outages`),
        unless another message of its tenant already waits here."""
        if delivered < self.topology.max_deliver:
            await work(payload)
            return
        subject = message.raw_message.subject
        tenant = identity(self.topology, subject, message.body).get("tenant") or ""
        held: list[str] = []

        def waiting(exc: TransientError, pause: float) -> bool:
            if not held:
                if tenant in self._waiting:
                    return False
                self._waiting.add(tenant)
                held.append(tenant)
            log.warning("%s: waiting %.0fs for an outage to end: %s", self.name, pause, exc)
            self.metrics.retried.labels(self.name, exc.code).inc()
            return True

        try:
            await through_outages(
                lambda: work(payload),
                patience_s=self.outage_patience_s,
                stopping=self.stopping,
                waiting=waiting,
            )
        finally:
            self._waiting.difference_update(held)

    async def _retry_or_give_up(self, message: Message, exc: Exception, deliveries: int) -> None:
        code = exc.code if isinstance(exc, TransientError) else ErrorCode.INTERNAL
        if not isinstance(exc, TransientError):
            log.exception("%s: unexpected failure (delivery %d)", self.name, deliveries)
        reason = f"{type(exc).__name__}: {exc}"
        if deliveries >= self.topology.max_deliver:
            await self._dead_letter(
                message,
                ErrorCode.MAX_DELIVERIES,
                f"gave up after {deliveries} deliveries: {reason}",
                deliveries,
            )
            return
        retry_after = exc.retry_after_s if isinstance(exc, TransientError) else None
        delay = retry_after if retry_after is not None else backoff_s(deliveries)
        log.warning("%s: retrying in %.1fs (delivery %d): %s", self.name, delay, deliveries, reason)
        self.metrics.retried.labels(self.name, code).inc()
        await message.nack(delay=delay)

    async def _dead_letter(self, message: Message, code: str, reason: str, deliveries: int) -> None:
        try:
            await self.record_dead_letter(
                stage=self.name,
                code=code,
                reason=reason,
                subject=message.raw_message.subject,
                sequence=stream_sequence(message),
                deliveries=deliveries,
                body=message.body,
            )
        except Exception:
            # Never drop a message we could not record: leave it for a later delivery.
            log.exception("%s: could not dead-letter; will retry", self.name)
            await message.nack(delay=backoff_s(deliveries))
            return
        self.metrics.dead_lettered.labels(self.name, code).inc()
        await message.reject()

    async def record_dead_letter(
        self,
        *,
        stage: str,
        code: str,
        reason: str,
        subject: str,
        sequence: int | None,
        deliveries: int,
        body: bytes,
    ) -> None:
        """Publish a message's dead letter and, for a document, its ``document.failed``
        (:mod:`kbus_runtime.dead_letters` makes them).

        Raises whatever the publish raises: the caller must keep the message in that case.
        """
        letter = letter_of(
            self.topology,
            stage=stage,
            code=code,
            reason=reason,
            subject=subject,
            sequence=sequence,
            deliveries=deliveries,
            body=body,
        )
        log.warning("%s: dead-lettering (%s): %s", stage, code, reason)
        self._count_refusal(letter.tenant, code)
        # Ids make a retry after a half-done attempt harmless: JetStream drops the repeat.
        msg_id = f"{stage}/{letter.subject}/{letter.stream_sequence}"
        restricted = not message_is_everyones(self.topology.channel_of(subject), body)
        await self.record(
            letter,
            self.topology.dead_letter(stage, letter.tenant, letter.library, restricted),
            stream=self.topology.dead_letter_stream.name,
            msg_id=msg_id,
            tenant=letter.tenant,
            budget=Resource.DEAD_LETTERS,
        )
        failed = failure_of(self.topology, letter)
        if failed is not None:
            await self.record(
                failed,
                self.topology.failed(failed.tenant, failed.library, restricted),
                stream=self.topology.receipts_stream.name,
                msg_id=msg_id,
                tenant=failed.tenant,
                budget=Resource.RECEIPTS,
            )
