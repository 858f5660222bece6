"""One message's way through the gate: decoded, admitted (kbus_gateway.admission), stored,
the dead letter it replays removed (kbus_gateway.replays), answered as JetStream would.

Every failure becomes the refusal JetStream's publishers understand (``Refused``): 400 for a
message that will never be stored as it is, 429 past a budget, 503 for what a re-send may get
through (nats-py and the nats CLI send again on 503).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from kbus_contract import (
    Accepted,
    BodyPart,
    DocumentAdded,
    DocumentDeleted,
    ErrorReply,
    LibrarySync,
    Refused,
)
from kbus_contract.errors import ErrorCode, TransientError
from kbus_contract.intake import refused
from kbus_contract.tenancy import Identity
from kbus_contract.wire import until_acknowledged
from kbus_runtime.answering import Answer, Inbound
from kbus_runtime.stage import Stage
from nats.js.errors import APIError
from pydantic import BaseModel

from kbus_gateway.admission import Admission, Admitted
from kbus_gateway.replays import Replays

M = TypeVar("M", bound=BaseModel)
Admit = Callable[[Inbound, Identity, M], Awaitable[Admitted]]


class Gate:
    """Answers what tenants send into the streams."""

    def __init__(
        self, stage: Stage, admission: Admission, replays: Replays, store_bound_s: float
    ) -> None:
        self.stage = stage
        self.admission = admission
        self.replays = replays
        self.store_bound_s = store_bound_s

    def answers(self) -> dict[str, Answer]:
        """The gate's answer to each catalog channel it serves."""
        a = self.admission
        return {
            "document.added": lambda inbound: self.take(inbound, DocumentAdded, a.document),
            "document.deleted": lambda inbound: self.take(inbound, DocumentDeleted, a.deletion),
            "document.synced": lambda inbound: self.take(inbound, LibrarySync, a.sync),
            "document.body": lambda inbound: self.take(inbound, BodyPart, a.body_part),
        }

    async def take(self, inbound: Inbound, model: type[M], admit: Admit[M]) -> Accepted | Refused:
        """Decode, admit and store one message; the answer a JetStream publisher expects. A
        tenant already past its budget is refused before its message is read at all: a flood
        costs the gate next to nothing."""
        sent = self.stage.topology.identity(inbound.subject)
        try:
            await self.admission.early(inbound, sent)
        except TransientError as exc:
            return refused(exc.code, exc.reason, retryable=True)

        async def work(message: M) -> Accepted:
            admitted = await admit(inbound, sent, message)
            accepted = await self.store(admitted)
            await self.replays.settle(inbound, sent, admitted.payload)
            return accepted

        reply = await self.stage.answer(inbound.body, model, work, sent.tenant)
        if isinstance(reply, ErrorReply):
            info = reply.error
            return refused(info.code, info.message, retryable=info.retryable)
        return reply

    async def store(self, admitted: Admitted) -> Accepted:
        """Store a text's parts, then the message (each re-sent under its id while its stream
        has no leader)."""
        for part in admitted.parts:
            await self._publish(part)
        return await self._publish(admitted)

    async def _publish(self, admitted: Admitted) -> Accepted:
        js = self.stage.broker.connection.jetstream()
        try:
            ack = await until_acknowledged(
                lambda: js.publish(
                    admitted.subject,
                    admitted.payload,
                    stream=admitted.stream,
                    headers=admitted.headers,
                ),
                bound_s=self.store_bound_s,
            )
        except APIError as exc:
            raise TransientError(
                f"the bus could not store it ({exc.description}): send it again",
                code=ErrorCode.BUS_ERROR,
            ) from exc
        except Exception as exc:
            raise TransientError(
                "the bus did not acknowledge it in time: send it again", code=ErrorCode.BUS_ERROR
            ) from exc
        if not ack.duplicate:
            for subject in admitted.counted:
                self.admission.usage.added(admitted.stream, subject)
            if admitted.document is not None and self.stage.withdrawals is not None:
                # What any earlier publish of it still waiting need not do any more.
                await self.stage.withdrawals.published(*admitted.document, ack.seq)
        return Accepted(stream=admitted.stream, duplicate=bool(ack.duplicate))
