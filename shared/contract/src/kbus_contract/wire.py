"""Messages off the wire, and the one way a kbus request is sent and its reply read.

Every request (``kb.search``, ``kb.stats``, ``kb.embed``, ``kb.rerank``) goes through
:func:`request` on a plain nats-py connection, whoever asks (a service, the re-embedding job or
the client). A reply is the expected contract or an error reply; :func:`parse_reply` turns the
latter back into the typed error it describes, so a caller handles one kind of failure.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from nats.aio.client import Client
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.errors import APIError, NoStreamResponseError, ServiceUnavailableError
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind
from pydantic import BaseModel, ValidationError

from kbus_contract.base import MAX_BUDGET_MS
from kbus_contract.errors import ErrorCode, PermanentError, TransientError
from kbus_contract.identifiers import PATTERN_WORDS
from kbus_contract.requests import ErrorReply

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

_tracer = trace.get_tracer("kbus")
log = logging.getLogger("kbus")

#: How long a caller waits for a search by default, in seconds; a search without a budget of its
#: own gets as long on the server.
DEFAULT_WAIT_S = 10.0
#: Seconds a chat model has to answer a one-word readiness check before a profile that needs it
#: is refused: a hosted model's first answer under load, or a small local one on a busy CPU, can
#: take several seconds, and a model that is busy is not down (a refused connection fails at once).
CHAT_CHECK_S = 15.0
#: How long a caller waits for a profile to be set: the ingestor asks each service whose chat
#: model a new link needs (each has :data:`CHAT_CHECK_S`) before it keeps the profile.
PROFILE_WAIT_S = DEFAULT_WAIT_S + CHAT_CHECK_S
#: The most of a wait kept for a reply's way back, in seconds (a tenth of a shorter wait).
REPLY_MARGIN_S = 0.25


def budget_ms(wait_s: float) -> int:
    """The budget of a request whose caller waits ``wait_s``: the wait, less the reply's way
    back, so the answer (or its error) arrives before the caller gives up (at most the longest
    budget a request may give)."""
    margin_s = min(REPLY_MARGIN_S, wait_s / 10)
    return min(MAX_BUDGET_MS, max(1, int((wait_s - margin_s) * 1000)))


def decode(body: bytes, model: type[M]) -> M:
    """Parse a message body into its contract, or raise :class:`PermanentError` saying why."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise PermanentError(
            describe_validation_error(exc), code=ErrorCode.INVALID_MESSAGE
        ) from exc


def describe_validation_error(exc: ValidationError, limit: int = 5) -> str:
    """A short, readable account of what was wrong with a message."""
    parts = []
    for err in exc.errors(include_url=False, include_input=False)[:limit]:
        where = ".".join(str(p) for p in err["loc"]) or "message"
        parts.append(f"{where}: {_words(err)}")
    more = exc.error_count() - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def _words(err: Any) -> str:
    """Pydantic's message for one error, in words a person can act on."""
    if err["type"] == "string_pattern_mismatch":
        pattern = err.get("ctx", {}).get("pattern", "")
        return "must be " + PATTERN_WORDS.get(pattern, f"text matching {pattern}")
    return str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")


def parse_reply(body: bytes, model: type[M], stage: str) -> M:
    """Parse a request's reply: the expected model, or raise what the error reply says."""
    try:
        data: Any = json.loads(body)
    except ValueError as exc:
        raise TransientError(
            f"{stage} sent a reply that is not JSON", code=ErrorCode.BAD_REPLY, stage=stage
        ) from exc
    if isinstance(data, dict) and data.get("kind") == "error":
        info = ErrorReply.model_validate(data).error
        if info.retryable:
            raise TransientError(
                info.message, code=info.code, stage=info.stage, retry_after_s=info.retry_after_s
            )
        raise PermanentError(info.message, code=info.code, stage=info.stage)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise TransientError(
            f"{stage} sent an unexpected reply: {describe_validation_error(exc)}",
            code=ErrorCode.BAD_REPLY,
            stage=stage,
        ) from exc


async def request(
    nc: Client,
    subject: str,
    payload: BaseModel,
    reply_model: type[M],
    *,
    stage: str,
    timeout_s: float,
) -> M:
    """Send a request and parse its reply; silence and error replies become typed errors.

    ``stage`` names who answers the subject, for the errors. The request is sent in a span
    (``ask <stage>``); only when that span is recorded does the request carry headers, its trace
    context: nats-py parses any header block with the email package on every message it
    receives, so an untraced request has none.
    """
    with _tracer.start_as_current_span(f"ask {stage}", kind=SpanKind.CLIENT) as span:
        headers: dict[str, str] | None = None
        if span.is_recording():
            span.set_attribute("messaging.destination.name", subject)
            headers = {}
            propagate.inject(headers)
        try:
            response = await nc.request(
                subject, payload.model_dump_json().encode(), timeout=timeout_s, headers=headers
            )
        except NoRespondersError as exc:
            raise TransientError(
                f"no {stage} is running",
                code=ErrorCode.unanswered(stage, timed_out=False),
                stage=stage,
            ) from exc
        except (NatsTimeoutError, TimeoutError) as exc:
            raise TransientError(
                f"{stage} did not answer within {timeout_s:.1f}s",
                code=ErrorCode.unanswered(stage, timed_out=True),
                stage=stage,
            ) from exc
        return parse_reply(response.data, reply_model, stage)


#: What a JetStream publish raises while its stream has no leader (nats-py turns "no
#: responders" into NoStreamResponseError) or when its acknowledgement did not come.
_UNACKNOWLEDGED = (
    NatsTimeoutError,
    TimeoutError,
    NoRespondersError,
    NoStreamResponseError,
    ServiceUnavailableError,
)

#: JetStream's answer to a resend while the server is still storing the first copy (a new
#: leader replicating it): sent again after the pause, it is acknowledged as a duplicate.
DUPLICATE_IN_PROCESS = 10158

#: Seconds a publish (or another JetStream call) is re-sent for while a stream has no leader
#: (an election, a restart).
PUBLISH_BOUND_S = 30.0


async def until_acknowledged(
    publish: Callable[[], Awaitable[T]], *, bound_s: float = PUBLISH_BOUND_S
) -> T:
    """Run ``publish`` (a JetStream publish carrying a ``Nats-Msg-Id``, or any JetStream API
    call that is safe to repeat, such as declaring a stream) until it is acknowledged, or
    ``bound_s`` passes.

    A publish that timed out may still have been stored, and one that found no responders
    met a stream between leaders: either way the same message is sent again, and the stream's
    duplicate window drops a second copy of an id it already holds. Anything else is raised
    at once, and so is the last failure when the bound is reached.
    """
    deadline = time.monotonic() + bound_s
    pause = 0.05
    while True:
        try:
            return await publish()
        except (*_UNACKNOWLEDGED, APIError) as exc:
            if not isinstance(exc, _UNACKNOWLEDGED) and exc.err_code != DUPLICATE_IN_PROCESS:
                raise
            if time.monotonic() + pause > deadline:
                raise
            log.warning("a publish was not acknowledged; sending it again in %.2f s", pause)
            await asyncio.sleep(pause)
            pause = min(2 * pause, 1.0)
