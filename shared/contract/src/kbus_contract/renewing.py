"""A NATS user's credentials kept current: a user JWT carries an expiry, and a connection
moves to the renewed JWT before it.

nats-auth issues every user JWT with an end (``exp``, its ``--lifetime``) and issues it again,
for the same key, once less than a third of that is left (``--renew``, an operator's daily
job). nats-server closes a connection when its JWT ends, and nats-py does not reconnect after
that (nats-io/nats.py#193: it closes the client for good). So whoever holds a credential reads
it again from where its operator puts it (a file, a mounted Kubernetes Secret) every
:data:`LOOK_EVERY_S` at most, and when it finds a later JWT of the same key it reconnects with
it at once: the requests in flight are asked again on the new connection, as after any
reconnection, so none is lost. A credential with nothing newer to read is logged once, in one
sentence, when a tenth of its life is left; at its end the server closes the connection.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import nkeys
from nats.aio.client import Client
from nats.errors import Error as NatsError

from kbus_contract.alongside import alongside

log = logging.getLogger(__name__)

#: How often, at most, the credential's source is read again.
LOOK_EVERY_S = 60.0
#: ... and at least (a short-lived JWT is looked at more often: every twentieth of its life).
LOOK_LEAST_S = 0.5
_JWT_BEGIN, _SEED_BEGIN = "BEGIN NATS USER JWT", "BEGIN USER NKEY SEED"


class RenewingError(NatsError):
    """Why a connection reconnects: its credential was renewed."""

    def __str__(self) -> str:
        return "nats: reconnecting with the renewed credential"


def _after(text: str, marker: str) -> str:
    lines = text.splitlines()
    for number, line in enumerate(lines[:-1]):
        if marker in line:
            return lines[number + 1].strip()
    raise ValueError(f"not NATS credentials: no {marker} block")


def jwt_of(creds: str) -> str:
    """The user JWT in a ``.creds`` text.

    Raises:
        ValueError: the text holds none.
    """
    return _after(creds, _JWT_BEGIN)


def jwt_claims(token: str) -> dict[str, Any]:
    """A JWT's claims (read, not verified: the server verifies it)."""
    part = token.split(".")[1]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return claims


def claims_of(creds: str) -> dict[str, Any]:
    """The claims of the user JWT in a ``.creds`` text."""
    return jwt_claims(jwt_of(creds))


class HeldCredentials:
    """A user's credentials (``.creds`` text) as ``read`` returns them now: nats-py's JWT and
    signature callbacks answer from the last text read, so a reconnection uses the newest."""

    def __init__(self, read: Callable[[], str], where: str = "", now: str | None = None) -> None:
        """``now``: the text as its holder has just read it (else ``read`` is asked)."""
        self._read = read
        self.where = where
        self.text = read() if now is None else now
        self._claims = claims_of(self.text)

    @property
    def expires_at(self) -> float | None:
        """When the JWT held ends (Unix time; None: it never does)."""
        exp = self._claims.get("exp")
        return float(exp) if exp else None

    def options(self) -> dict[str, Any]:
        """``nats.connect``'s options for these credentials."""
        return {"user_jwt_cb": self._jwt, "signature_cb": self._sign}

    def _jwt(self) -> bytes:
        return jwt_of(self.text).encode()

    def _sign(self, nonce: str) -> bytes:
        pair = nkeys.from_seed(_after(self.text, _SEED_BEGIN).encode())
        try:
            return base64.b64encode(pair.sign(nonce.encode()))
        finally:
            pair.wipe()

    def renewed(self) -> bool:
        """Read the source again; whether it holds a later JWT of the same key (then held)."""
        try:
            text = self._read()
            claims = claims_of(text)
        except (OSError, ValueError):  # being rewritten, or gone: looked at again later
            return False
        later = (claims.get("exp") or 0) > (self._claims.get("exp") or 0)
        if claims.get("sub") != self._claims.get("sub") or not later:
            return False
        self.text, self._claims = text, claims
        return True

    async def keep_current(self, nc: Client) -> None:
        """Until cancelled: move ``nc`` to each renewal of the credentials as it appears."""
        warned = False
        while True:
            ends = self.expires_at
            if ends is None:
                return
            left = ends - time.time()
            life = ends - float(self._claims.get("iat") or ends - LOOK_EVERY_S)
            await asyncio.sleep(min(LOOK_EVERY_S, max(LOOK_LEAST_S, life / 20)))
            if self.renewed():
                warned = False
                await reconnect(nc)
            elif left < life / 10 and not warned:
                warned = True
                log.warning(
                    "The NATS credential %s ends at %s and nothing newer was found there: ask "
                    "its operator to renew it (nats-auth --renew).",
                    self.where or "held",
                    time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ends)),
                )


async def reconnect(nc: Client) -> None:
    """Reconnect ``nc`` now, as after a lost connection (its subscriptions are made again and
    what it publishes meanwhile is buffered). nats-py 2.14 has no public way: this is the path
    its own stale-connection handling takes. A connection that may not reconnect is left to
    end with its JWT."""
    if nc.is_connected and nc.options["allow_reconnect"]:
        await nc._process_op_err(RenewingError())


@contextlib.asynccontextmanager
async def renewing(held: HeldCredentials | None, nc: Client) -> AsyncIterator[None]:
    """While in it, ``nc`` moves to each renewal of ``held`` before its JWT ends."""
    if held is None:
        yield
        return
    async with alongside(held.keep_current(nc)):
        yield
