"""Connect, or learn why not as soon as it is known.

nats-py tries each server again after a pause, so a refused credential or a bus that is down
would take seconds to say so; here a refused authorization, or every server refusing the
connection, ends the attempt at once with :class:`UnreachableError`, naming which it was. The CLI,
MCP and the HTTP console connect this way.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kbus_client.client import KbClient


class UnreachableError(ConnectionError):
    """NATS could not be reached: ``refused_authorization`` when it refused the credential
    (revoked, narrowed since, of another installation, or none given), else why not."""

    def __init__(self, url: str, said: str, refused_authorization: bool) -> None:
        super().__init__(said)
        self.url = url
        self.said = said
        self.refused_authorization = refused_authorization


async def connect_at_once(
    url: str, *, reconnect_attempts: int = 2, connect_timeout_s: float = 5.0, **options: Any
) -> KbClient:
    """:meth:`KbClient.connect` with ``options``, ended at the first sign that it cannot
    succeed.

    Raises:
        UnreachableError: the credential was refused, or no server of ``url`` took the connection.
    """
    said: list[str] = []
    refused_by = 0
    known = asyncio.Event()

    async def heard(exc: Exception) -> None:
        nonlocal refused_by
        said.append(str(exc) or type(exc).__name__)
        refused_by += isinstance(exc, ConnectionRefusedError)
        if _authorization(said) or refused_by >= len(url.split(",")):
            known.set()

    connecting = asyncio.ensure_future(
        KbClient.connect(
            url,
            max_reconnect_attempts=reconnect_attempts,
            connect_timeout=connect_timeout_s,
            error_cb=heard,
            **options,
        )
    )
    ended = asyncio.ensure_future(known.wait())
    try:
        await asyncio.wait({connecting, ended}, return_when=asyncio.FIRST_COMPLETED)
        if not connecting.done():
            connecting.cancel()
            raise UnreachableError(url, said[-1], _authorization(said))
        try:
            return connecting.result()
        except Exception as exc:
            why = said[-1] if said else (str(exc) or type(exc).__name__)
            raise UnreachableError(url, why, _authorization(said)) from exc
    finally:
        ended.cancel()


def _authorization(said: list[str]) -> bool:
    return any("authorization" in s.lower() for s in said)
