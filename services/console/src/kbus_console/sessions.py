"""Each token's connection to NATS, as its credential, and what one tenant may hold of them.

A token carries a credential (:meth:`kbus_client.CredentialFile.token`); the console connects
with that credential's own user, so NATS, the gate, the budgets and the scoped view hold an HTTP
request to exactly what the credential may do over NATS. A credential revoked or narrowed since
is refused by NATS (its open connection is closed by the server): its token ends with it.

Shared resources are bounded per tenant and cost follows active tenants only: at most
``tenant_sessions`` connections of one tenant and ``sessions`` in all (the least recently used
closed first), ``tenant_requests`` requests of one tenant at once (more refused at once), a
connection unused for ``idle_s`` closed, and a tenant with nothing open holds no entry.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from kbus_client import CredentialFile, KbClient
from kbus_client.connecting import UnreachableError, connect_at_once
from kbus_contract.errors import ErrorCode, KbusError, TransientError

from kbus_console.settings import ConsoleSettings


class UnauthorizedError(KbusError):
    """The request holds no token the bus takes (HTTP 401)."""

    code = ErrorCode.PERMISSION_DENIED


@dataclass
class Session:
    """One credential's connection."""

    tenant: str
    client: KbClient
    used: float = field(default_factory=time.monotonic)


class Sessions:
    """The open connections, by a hash of their token."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self._open: OrderedDict[str, Session] = OrderedDict()
        self._busy: dict[str, int] = {}
        self._connecting: dict[str, asyncio.Lock] = {}

    @asynccontextmanager
    async def serving(self, authorization: str | None) -> AsyncIterator[KbClient]:
        """The client a request's ``Authorization`` header reaches kbus with, held for the
        request.

        Raises:
            UnauthorizedError: no token, not a kbus token, or one the bus refuses.
            TransientError: the tenant already has ``tenant_requests`` under way
                (``quota_exceeded``), or the bus cannot be reached.
        """
        held = _credential(authorization)
        tenant = held.tenant
        if self._busy.get(tenant, 0) >= self.settings.tenant_requests:
            raise TransientError(
                f"tenant {tenant} has {self.settings.tenant_requests} requests under way, "
                "its most: send this again once one is answered",
                code=ErrorCode.QUOTA_EXCEEDED,
            )
        self._busy[tenant] = self._busy.get(tenant, 0) + 1
        try:
            yield await self._client(_key(authorization or ""), held)
        finally:
            self._busy[tenant] -= 1
            if not self._busy[tenant]:
                del self._busy[tenant]

    async def _client(self, key: str, held: CredentialFile) -> KbClient:
        session = self._open.get(key)
        if session is not None and not session.client.nc.is_closed:
            session.used = time.monotonic()
            self._open.move_to_end(key)
            return session.client
        lock = self._connecting.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                return await self._connect(key, held)
        finally:
            if not lock.locked():
                self._connecting.pop(key, None)

    async def _connect(self, key: str, held: CredentialFile) -> KbClient:
        session = self._open.pop(key, None)
        if session is not None and not session.client.nc.is_closed:
            self._open[key] = session  # another request connected it meanwhile
            return session.client
        try:
            client = await connect_at_once(
                self.settings.bus.nats_url,
                credential=held,
                timeout_s=self.settings.timeout_s,
                reconnect_attempts=0,
            )
        except UnreachableError as exc:
            if exc.refused_authorization:
                raise UnauthorizedError(
                    "the bus refused this token's credential (its JWT ended, or it was revoked "
                    "or narrowed since, or is of another installation): ask for a new token"
                ) from exc
            raise TransientError(
                "the console cannot reach the bus: try again shortly", code=ErrorCode.BUS_ERROR
            ) from exc
        self._open[key] = Session(held.tenant, client)
        await self._make_room(held.tenant)
        return client

    async def _make_room(self, tenant: str) -> None:
        """Close the least recently used connections past the tenant's and the total bound."""
        mine = [k for k, s in self._open.items() if s.tenant == tenant]
        for key in mine[: max(0, len(mine) - self.settings.tenant_sessions)]:
            await self._close(key)
        while len(self._open) > self.settings.sessions:
            await self._close(next(iter(self._open)))

    async def sweep(self) -> None:
        """Close the connections unused for ``idle_s``."""
        now = time.monotonic()
        for key in [k for k, s in self._open.items() if now - s.used > self.settings.idle_s]:
            await self._close(key)

    async def _close(self, key: str) -> None:
        session = self._open.pop(key, None)
        if session is not None:
            await session.client.close()

    async def close(self) -> None:
        for key in list(self._open):
            await self._close(key)

    def counts(self) -> tuple[int, int]:
        """Connections open, and tenants with requests under way."""
        return len(self._open), len(self._busy)


def _credential(authorization: str | None) -> CredentialFile:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthorizedError(
            "send the token as `Authorization: Bearer <token>` (kbus token --credential FILE "
            "makes one)"
        )
    try:
        return CredentialFile.from_token(token.strip())
    except ValueError as exc:
        raise UnauthorizedError(f"{exc}: kbus token --credential FILE makes one") from exc


def _key(authorization: str) -> str:
    return hashlib.sha256(authorization.encode()).hexdigest()
