"""A document's way onto the bus: its message id, its body by claim check when large, the
publish to the gate resent until stored, and the receipt it waits for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kbus_contract import DocumentAdded
from kbus_contract.errors import PermanentError
from kbus_contract.lanes import Lane
from kbus_contract.topology import Topology
from kbus_contract.wire import describe_validation_error
from nats.aio.client import Client
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind
from pydantic import ValidationError

from kbus_client.bodies import ClaimChecks
from kbus_client.errors import DocumentRejectedError
from kbus_client.interruptions import Interruptions
from kbus_client.msgids import MessageIds
from kbus_client.receipts import ReceiptWatcher, Waiting
from kbus_client.results import PublishResult
from kbus_client.spans import document_attributes
from kbus_client.storing import until_stored

_tracer = trace.get_tracer("kbus.client")


def new_document(**fields: Any) -> DocumentAdded:
    """The document to publish, or ``ValueError`` saying what is wrong with it."""
    try:
        return DocumentAdded(**fields)
    except ValidationError as exc:
        raise ValueError(describe_validation_error(exc)) from exc


@dataclass(eq=False)
class Publisher:
    """Publishes documents for one client, in the caller's trace."""

    nc: Client
    topology: Topology
    bodies: ClaimChecks
    receipts: ReceiptWatcher
    ids: MessageIds
    #: A publish the bus refuses ends at once as ``permission_denied``, not as a timeout.
    interruptions: Interruptions

    async def publish(
        self,
        doc: DocumentAdded,
        wait: bool,
        timeout_s: float,
        data: bytes | None,
        lane: Lane = Lane.BULK,
    ) -> PublishResult:
        """Publish ``doc`` (``data``: the file its claim check refers to) in the tenant's
        ``lane``; with ``wait``, return once it is searchable."""
        waiting = await self.receipts.expect_receipt(doc) if wait else None
        try:
            with _tracer.start_as_current_span(
                "kbus publish", kind=SpanKind.PRODUCER, attributes=document_attributes(doc)
            ) as span:
                result = await self._send(doc, waiting, timeout_s, data, lane)
                span.set_attribute("kbus.duplicate", result.duplicate)
                return result
        finally:
            if waiting is not None:
                self.receipts.forget(waiting)

    async def _send(
        self,
        doc: DocumentAdded,
        waiting: Waiting | None,
        timeout_s: float,
        data: bytes | None,
        lane: Lane,
    ) -> PublishResult:
        msg_id = self.ids.for_publish(doc)
        try:
            if data is not None and doc.body is not None:
                await self.bodies.put_file(doc.tenant, doc.library, doc.body, data)
            payload = await self.bodies.payload(doc, msg_id)
            headers = {"content-type": "application/json", "Nats-Msg-Id": msg_id}
            propagate.inject(headers)  # the trace context, when the caller traces
            subject = self.topology.added(doc.tenant, doc.library, lane)
            js = self.nc.jetstream()
            ack = await until_stored(
                lambda: self.interruptions.race(
                    subject, "", js.publish(subject, payload, headers=headers)
                )
            )
        except PermanentError as exc:
            # Refused at the gate: never stored, and the same document would be again.
            raise DocumentRejectedError(exc.reason, code=exc.code, stage=exc.stage) from exc
        if ack.duplicate:
            return PublishResult(doc, None, duplicate=True)
        receipt = await self.receipts.wait(waiting, timeout_s) if waiting else None
        return PublishResult(doc, receipt)
