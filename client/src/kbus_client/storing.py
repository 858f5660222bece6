"""A message sent to the gate until it is stored: re-sent while the bus cannot take it (no
gate, no stream leader, no acknowledgement), paced while its tenant is past a budget, and any
other refusal raised as the typed error it names."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from kbus_contract.errors import ErrorCode, KbusError, PermanentError, TransientError
from kbus_contract.intake import REFUSAL_BASE, refusal_code
from kbus_contract.wire import PUBLISH_BOUND_S, until_acknowledged
from nats.js.api import PubAck
from nats.js.errors import APIError

#: The longest pause between two sends while the tenant is past a budget.
MAX_PACE_S = 2.0


def as_error(exc: APIError) -> KbusError:
    """The kbus error a gate's refusal names (a JetStream error of the server's own otherwise)."""
    if exc.err_code is None or exc.err_code < REFUSAL_BASE:
        return TransientError(
            f"the bus refused it: {exc.description}", code=ErrorCode.BUS_ERROR, stage="gateway"
        )
    code = refusal_code(exc.err_code, exc.description)
    reason = (exc.description or "").removeprefix(f"{code}: ")
    if exc.code in (429, 503):
        return TransientError(reason, code=code, stage="gateway")
    return PermanentError(reason, code=code, stage="gateway")


async def until_stored(
    publish: Callable[[], Awaitable[PubAck]], *, bound_s: float = PUBLISH_BOUND_S
) -> PubAck:
    """Send until stored, or ``bound_s`` passes; raise the refusal as a :class:`KbusError`."""
    deadline = time.monotonic() + bound_s
    pause = 0.1
    while True:
        try:
            left = max(0.1, deadline - time.monotonic())
            return await until_acknowledged(publish, bound_s=left)
        except APIError as exc:
            error = as_error(exc)
        if error.code != ErrorCode.QUOTA_EXCEEDED or time.monotonic() + pause > deadline:
            raise error
        await asyncio.sleep(pause)
        pause = min(2 * pause, MAX_PACE_S)
