"""The console: kbus over HTTP (the API, ``/v1``) and in a browser (the web console, ``/``),
each request as the credential its bearer token, or its sign-in, carries."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from prometheus_client import CollectorRegistry, Counter, Gauge
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kbus_console.handlers import BadRequestError, Handlers, no_route, refused
from kbus_console.sessions import Sessions
from kbus_console.settings import ConsoleSettings
from kbus_console.web.routes import Console
from kbus_console.web.signins import SignIns

#: Sent with every answer: nothing of it is a page to frame, run or sniff, or to keep.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def create_app(settings: ConsoleSettings | None = None) -> Starlette:
    """The HTTP API (no CORS: a browser page of another origin cannot call it)."""
    settings = settings or ConsoleSettings()
    sessions = Sessions(settings)
    signins = SignIns(settings.sessions, settings.tenant_sessions, settings.idle_s)
    registry = CollectorRegistry()
    answered = Counter(
        "kbus_console_requests",
        "HTTP requests answered, by method and status",
        ["method", "status"],
        registry=registry,
    )
    Gauge("kbus_console_sessions", "Credentials connected to NATS", registry=registry).set_function(
        lambda: sessions.counts()[0]
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sweeping = asyncio.create_task(_sweep(sessions, settings.idle_s))
        try:
            yield
        finally:
            sweeping.cancel()
            await sessions.close()

    return Starlette(
        routes=[
            *Handlers(sessions, settings.max_body_bytes, registry).routes(),
            *Console(sessions, signins, settings.max_body_bytes).routes(),
        ],
        exception_handlers={BadRequestError: refused, 404: no_route, 405: no_route},
        middleware=[Middleware(Secured, answered=answered)],
        lifespan=lifespan,
    )


class Secured:
    """Adds :data:`SECURITY_HEADERS` to every answer, and counts it (ASGI middleware)."""

    def __init__(self, app: ASGIApp, answered: Counter) -> None:
        self.app = app
        self.answered = answered

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.answered.labels(scope.get("method", ""), str(message["status"])).inc()
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    if name not in headers:  # a page sets its own policy
                        headers[name] = value
            await send(message)

        await self.app(scope, receive, sending)


async def _sweep(sessions: Sessions, idle_s: float) -> None:
    while True:
        await asyncio.sleep(max(1.0, idle_s / 4))
        await sessions.sweep()
