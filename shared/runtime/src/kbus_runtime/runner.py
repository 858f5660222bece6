"""Run a service app under uvicorn (``python -m kbus_<service>``)."""

from __future__ import annotations

import uvicorn
from faststream.asgi import AsgiFastStream
from threadpoolctl import threadpool_limits

from kbus_runtime.settings import ServiceSettings


def serve(app: AsgiFastStream, settings: ServiceSettings) -> None:
    """Serve the app's broker, ``/health`` and ``/metrics`` until SIGTERM or SIGINT.

    BLAS runs on the calling thread: a service's model calls run on threads of its own, and
    BLAS's extra threads, spinning after each of a request's small products, took CPU from
    the other requests (docs/performance.md, "Token states kept at ingest").
    """
    threadpool_limits(1, user_api="blas")
    uvicorn.run(
        app,
        host=settings.http_host,
        port=settings.http_port,
        log_level=settings.log_level.lower(),
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=30,
    )
