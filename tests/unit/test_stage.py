"""Every outcome of the one place that turns a handler's end into an ack or a reply.

The message and the bus are stand-ins that record what was done to them (the real ones are
exercised by the integration and end-to-end tests); the decisions are the real code's.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from kbus_contract import DocumentAdded, ErrorReply, StatsReply, StatsRequest
from kbus_contract.errors import PermanentError, TransientError
from kbus_contract.topology import Topology
from kbus_runtime.redelivery import HAND_BACK_S, backoff_s
from kbus_runtime.stage import Stage
from kbus_runtime.stage_metrics import StageMetrics
from prometheus_client import CollectorRegistry

DOCUMENT = {
    "tenant": "acme",
    "library": "handbook",
    "document_id": "vpn.md",
    "title": "VPN",
    "text": "Connect with acme-vpn up.",
}


@dataclass
class Message:
    """A stream message: what was done to it, in order."""

    body: bytes
    delivered: int = 1
    subject: str = "document.added.acme.handbook"
    done: list[tuple[str, float | None]] = field(default_factory=list)

    @property
    def raw_message(self) -> Any:
        metadata = SimpleNamespace(
            num_delivered=self.delivered, sequence=SimpleNamespace(stream=42)
        )
        return SimpleNamespace(subject=self.subject, metadata=metadata)

    async def ack(self) -> None:
        self.done.append(("ack", None))

    async def nack(self, delay: float | None = None) -> None:
        self.done.append(("nack", delay))

    async def reject(self) -> None:
        self.done.append(("terminate", None))

    async def in_progress(self) -> None:
        self.done.append(("in_progress", None))


@dataclass
class Bus:
    """Records publishes; ``fail`` makes every publish raise."""

    fail: bool = False
    published: list[tuple[str, dict[str, Any], dict[str, str]]] = field(default_factory=list)

    @property
    def connection(self) -> Any:
        raise AssertionError("settle never asks another stage")

    async def publish(
        self, message: bytes, subject: str, *, stream: str, headers: dict[str, str]
    ) -> None:
        if self.fail:
            raise ConnectionError("the bus is down")
        self.published.append((subject, json.loads(message), headers))


def _stage(bus: Bus | None = None, **topology: Any) -> tuple[Stage, CollectorRegistry]:
    registry = CollectorRegistry()
    stage = Stage("ingestor", bus or Bus(), Topology(**topology), StageMetrics(registry))
    return stage, registry


def _count(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def _settle(stage: Stage, message: Message, raises: BaseException | None = None) -> None:
    async def work(_: DocumentAdded) -> None:
        if raises is not None:
            raise raises

    await stage.settle(message, DocumentAdded, work)


def _body(**change: Any) -> bytes:
    return json.dumps({**DOCUMENT, **change}).encode()


async def test_work_that_ends_well_is_acked_and_counted() -> None:
    stage, registry = _stage()
    message = Message(_body())
    await _settle(stage, message)
    assert message.done == [("ack", None)]
    assert _count(registry, "kbus_messages_processed_total", stage="ingestor") == 1


async def test_a_stopping_stage_hands_back_what_it_has_not_started() -> None:
    stage, registry = _stage()
    stage.stopping.set()
    message = Message(_body())
    await _settle(stage, message, raises=AssertionError("the work must not start"))
    assert message.done == [("nack", HAND_BACK_S)]
    assert _count(registry, "kbus_messages_handed_back_total", stage="ingestor") == 1
    assert _count(registry, "kbus_messages_processed_total", stage="ingestor") == 0


async def test_a_permanent_error_dead_letters_with_the_reason_then_terminates() -> None:
    bus = Bus()
    stage, registry = _stage(bus)
    message = Message(_body())
    await _settle(stage, message, PermanentError("no text to index", code="empty_document"))
    assert message.done == [("terminate", None)]
    [(letter_subject, letter, headers), (failed_subject, failed, _)] = bus.published
    assert letter_subject == "deadletter.ingestor.acme.handbook"
    assert (letter["code"], letter["reason"]) == ("empty_document", "no text to index")
    assert (letter["tenant"], letter["document_id"], letter["stream_sequence"]) == (
        "acme",
        "vpn.md",
        42,
    )
    assert json.loads(letter["original"]) == DOCUMENT
    assert headers["Nats-Msg-Id"] == "ingestor/document.added.acme.handbook/42"
    assert failed_subject == "document.failed.acme.handbook"
    assert failed["code"] == "empty_document"
    assert _count(
        registry, "kbus_messages_dead_lettered_total", stage="ingestor", code="empty_document"
    )


async def test_a_dead_letter_goes_to_the_tenant_its_subject_names_not_its_body() -> None:
    bus = Bus()
    stage, _ = _stage(bus)
    message = Message(_body(tenant="globex"), subject="document.added.acme.handbook")
    await _settle(stage, message, PermanentError("refused", code="tenant_mismatch"))
    [(subject, letter, _), (failed, _, _)] = bus.published
    assert (subject, failed) == (
        "deadletter.ingestor.acme.handbook",
        "document.failed.acme.handbook",
    )
    assert (letter["tenant"], letter["library"]) == ("acme", "handbook")


async def test_a_message_between_the_services_is_dead_lettered_under_its_body_s_tenant() -> None:
    bus = Bus()
    stage, _ = _stage(bus)
    named = {**DOCUMENT, "tenant": "globex", "library": "hr", "access": ["*"]}
    body = json.dumps({"document": named}).encode()
    await _settle(stage, Message(body, subject="chunks.ready"), PermanentError("bad"))
    assert bus.published[0][0] == "deadletter.ingestor.globex.hr"


@pytest.mark.parametrize(
    ("subject", "body", "restricted"),
    [
        ("document.added.acme.handbook", _body(), False),
        ("document.added.acme.handbook", _body(access=["sales"]), True),
        ("chunks.ready", json.dumps({"document": {**DOCUMENT, "access": ["*"]}}).encode(), False),
        ("chunks.ready", json.dumps({"document": {**DOCUMENT, "access": ["hr"]}}).encode(), True),
        ("chunks.ready", json.dumps({"document": DOCUMENT}).encode(), True),
        ("document.deleted.acme.handbook", b'{"tenant": "acme", "library": "handbook"}', False),
        (
            "document.deleted.acme.handbook",
            b'{"tenant": "acme", "library": "handbook", "document_id": "d1"}',
            True,
        ),
        ("document.synced.acme.handbook", b'{"tenant": "acme", "library": "handbook"}', True),
        ("document.added.acme.handbook", b"not json", True),
    ],
)
async def test_a_dead_letter_of_what_may_name_a_restricted_document_goes_on_its_restricted_form(
    subject: str, body: bytes, restricted: bool
) -> None:
    """A credential bound to some principals listens to the plain forms only: what it must not
    read (a restricted document's text, id or version; a sync's list; what cannot be read)
    goes on the form ending in .restricted, with its document.failed receipt."""
    bus = Bus()
    stage, _ = _stage(bus)
    await _settle(stage, Message(body, subject=subject), PermanentError("bad"))
    suffix = ".restricted" if restricted else ""
    assert bus.published[0][0] == "deadletter.ingestor.acme.handbook" + suffix
    forms = [published.endswith(".restricted") for published, _, _ in bus.published]
    assert forms == [restricted] * len(bus.published)  # the document.failed receipt too


async def test_a_message_that_is_not_its_contract_is_dead_lettered_saying_what_is_wrong() -> None:
    bus = Bus()
    stage, _ = _stage(bus)
    message = Message(_body(text="   "))
    await _settle(stage, message)
    assert message.done == [("terminate", None)]
    assert bus.published[0][1]["code"] == "invalid_message"
    assert "text is empty" in bus.published[0][1]["reason"]


async def test_a_transient_error_is_nacked_with_a_delay_that_grows_with_each_delivery() -> None:
    stage, registry = _stage()
    for delivered in (1, 3):
        message = Message(_body(), delivered=delivered)
        await _settle(stage, message, TransientError("Weaviate is down", code="store_error"))
        assert message.done == [("nack", backoff_s(delivered))]
    assert backoff_s(3) > backoff_s(1)
    assert _count(registry, "kbus_messages_retried_total", stage="ingestor", code="store_error")


async def test_a_transient_error_may_say_when_to_retry() -> None:
    stage, _ = _stage()
    message = Message(_body())
    await _settle(stage, message, TransientError("busy", retry_after_s=7.5))
    assert message.done == [("nack", 7.5)]


async def test_an_unexpected_error_is_retried_as_internal() -> None:
    stage, registry = _stage()
    message = Message(_body())
    await _settle(stage, message, KeyError("surprise"))
    assert message.done == [("nack", backoff_s(1))]
    assert _count(registry, "kbus_messages_retried_total", stage="ingestor", code="internal")


async def test_the_last_delivery_that_fails_is_dead_lettered_not_retried() -> None:
    bus = Bus()
    stage, _ = _stage(bus, max_deliver=3)
    message = Message(_body(), delivered=3)
    await _settle(stage, message, TransientError("took too long", code="deadline_exceeded"))
    assert message.done == [("terminate", None)]
    letter = bus.published[0][1]
    assert letter["code"] == "max_deliveries"
    assert letter["reason"].startswith("gave up after 3 deliveries")


async def test_the_last_delivery_waits_in_place_for_an_outage_to_end() -> None:
    """Weaviate out of file descriptors on a message's last delivery: the stage tries again
    (after backoff_s(1)) instead of dead-lettering it, and acks it once the store takes it."""
    bus = Bus()
    stage, registry = _stage(bus, max_deliver=3)
    message = Message(_body(), delivered=3)
    failures = [TransientError("open x: too many open files", code="store_write_failed")]

    async def work(_: DocumentAdded) -> None:
        if failures:
            raise failures.pop()

    await stage.settle(message, DocumentAdded, work)
    assert message.done == [("ack", None)]
    assert bus.published == []
    assert _count(
        registry, "kbus_messages_retried_total", stage="ingestor", code="store_write_failed"
    )


async def test_an_outage_longer_than_the_patience_is_dead_lettered_on_the_last_delivery() -> None:
    bus = Bus()
    stage, _ = _stage(bus, max_deliver=3)
    stage.outage_patience_s = 0.0
    message = Message(_body(), delivered=3)
    await _settle(stage, message, TransientError("connection refused", code="store_error"))
    assert message.done == [("terminate", None)]
    assert "store_error" in bus.published[0][1]["reason"]


def _scripted(
    script: Sequence[BaseException | None], calls: list[BaseException | None]
) -> Callable[[DocumentAdded], Awaitable[None]]:
    """Work that ends each time as the script's next outcome says (None: it succeeds)."""

    async def work(_: DocumentAdded) -> None:
        outcome = script[len(calls)]
        calls.append(outcome)
        if outcome is not None:
            raise outcome

    return work


async def test_a_message_is_dead_lettered_only_for_itself_or_an_outage_past_the_patience(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Random deliveries of random outcomes (success, an outage, another transient error, a
    permanent one): work that succeeds is acked; an earlier delivery that fails is nacked or,
    when permanent, dead-lettered; the last delivery goes on through outages while the patience
    lasts, and is dead-lettered only for the message's own fault or an outage past it."""
    monkeypatch.setattr("kbus_runtime.redelivery.backoff_s", lambda _: 0.001)
    rng = random.Random(57)
    outcomes = [
        None,
        TransientError("down", code="store_error"),
        TransientError("no answer", code="embedder_timeout"),
        TransientError("over budget", code="quota_exceeded", retry_after_s=0.001),
        TransientError("slow", code="deadline_exceeded"),
        PermanentError("bad", code="invalid_message"),
    ]
    for _ in range(300):
        max_deliver = rng.randint(2, 5)
        delivered = rng.randint(1, max_deliver)
        patient = rng.random() < 0.5
        script = [rng.choice(outcomes) for _ in range(rng.randint(1, 6))] + [None]
        bus = Bus()
        stage, _ = _stage(bus, max_deliver=max_deliver)
        stage.outage_patience_s = 60.0 if patient else 0.0
        calls: list[BaseException | None] = []
        message = Message(_body(), delivered=delivered)
        await stage.settle(message, DocumentAdded, _scripted(script, calls))
        last = calls[-1]
        waited = calls[:-1]
        assert all(isinstance(c, TransientError) and c.outage for c in waited), calls
        if delivered < max_deliver or not patient:
            assert len(calls) == 1, (delivered, max_deliver, patient, calls)
        [(done, _)] = [d for d in message.done if d[0] != "in_progress"]
        if last is None:
            assert done == "ack"
        elif isinstance(last, PermanentError) or delivered == max_deliver:
            assert done == "terminate"
            assert not (patient and isinstance(last, TransientError) and last.outage), calls
        else:
            assert done == "nack"


async def test_a_dead_letter_that_cannot_be_recorded_keeps_the_message() -> None:
    stage, _ = _stage(Bus(fail=True))
    message = Message(_body())
    await _settle(stage, message, PermanentError("bad"))
    assert message.done == [("nack", backoff_s(1))]


async def test_a_cancelled_handler_gives_its_message_back() -> None:
    stage, _ = _stage()
    message = Message(_body())
    with pytest.raises(asyncio.CancelledError):
        await _settle(stage, message, asyncio.CancelledError())
    assert message.done == [("nack", None)]


async def test_long_work_tells_the_server_it_is_in_progress() -> None:
    stage, _ = _stage(ack_wait_s=0.15)

    async def slow(_: DocumentAdded) -> None:
        await asyncio.sleep(0.2)

    message = Message(_body())
    await stage.settle(message, DocumentAdded, slow)
    assert ("in_progress", None) in message.done
    assert message.done[-1] == ("ack", None)


# -- requests: every failure becomes an error reply -----------------------------------------

STATS = StatsRequest(tenant="acme").model_dump_json().encode()


async def _answer(stage: Stage, body: bytes, raises: Exception | None = None) -> Any:
    async def work(req: StatsRequest) -> StatsReply:
        if raises is not None:
            raise raises
        return StatsReply(tenant=req.tenant, libraries=())

    return await stage.answer(body, StatsRequest, work)


async def test_a_request_answered_is_counted_ok() -> None:
    stage, registry = _stage()
    reply = await _answer(stage, STATS)
    assert isinstance(reply, StatsReply)
    assert _count(registry, "kbus_requests_total", stage="ingestor", outcome="ok") == 1


@pytest.mark.parametrize(
    ("error", "code", "retryable", "message"),
    [
        (PermanentError("no such thing", code="unknown"), "unknown", False, "no such thing"),
        (TransientError("later", code="busy"), "busy", True, "later"),
        (
            TransientError("model down", code="embedder_timeout", stage="embedder"),
            "embedder_timeout",
            True,
            "embedder: model down",
        ),
        (ValueError("bug"), "internal", True, "ValueError: bug"),
    ],
    ids=["permanent", "transient", "relayed", "unexpected"],
)
async def test_a_failed_request_gets_a_typed_error_reply(
    error: Exception, code: str, retryable: bool, message: str
) -> None:
    stage, registry = _stage()
    reply = await _answer(stage, STATS, error)
    assert isinstance(reply, ErrorReply)
    assert (reply.error.code, reply.error.retryable, reply.error.message) == (
        code,
        retryable,
        message,
    )
    assert reply.error.stage == "ingestor"
    assert _count(registry, "kbus_requests_total", stage="ingestor", outcome=code) == 1


async def test_a_request_that_is_not_its_contract_gets_a_reason() -> None:
    stage, _ = _stage()
    reply = await _answer(stage, b'{"tenant": "no spaces allowed"}')
    assert isinstance(reply, ErrorReply)
    assert reply.error.code == "invalid_message"
    assert "tenant" in reply.error.message


async def test_one_message_of_a_tenant_waits_for_an_outage_at_a_time() -> None:
    """A tenant whose last deliveries fail as outages by themselves holds one slot: its second
    such message is dead-lettered at once, while another tenant's still waits."""
    bus = Bus()
    stage, _ = _stage(bus, max_deliver=2)
    release = asyncio.Event()
    outage = TransientError("too many open files", code="store_write_failed")

    def failing_until(done: asyncio.Event | None) -> Callable[[DocumentAdded], Awaitable[None]]:
        tries: list[int] = []

        async def work(_: DocumentAdded) -> None:
            tries.append(1)
            if len(tries) == 1 or (done is not None and not done.is_set()):
                raise outage

        return work

    first = Message(_body(), delivered=2)
    held = asyncio.create_task(stage.settle(first, DocumentAdded, failing_until(release)))
    await asyncio.sleep(0.1)  # the first is waiting in place
    second = Message(_body(document_id="other.md"), delivered=2)
    # Not waiting behind the first: settled at once (a wait would outlast the bound).
    await asyncio.wait_for(stage.settle(second, DocumentAdded, failing_until(release)), 10)
    assert second.done == [("terminate", None)]
    globex = Message(_body(tenant="globex"), delivered=2, subject="document.added.globex.handbook")
    await stage.settle(globex, DocumentAdded, failing_until(None))
    assert globex.done == [("ack", None)]
    release.set()
    await held
    assert first.done[-1] == ("ack", None)
    assert {letter["document_id"] for _, letter, _ in bus.published} == {"other.md"}
