"""Run a service app under uvicorn (``python -m kbus_<service>``)."""

from __future__ import annotations

import uvicorn
from faststream.asgi import AsgiFastStream

from kbus_runtime.settings import ServiceSettings


def serve(app: AsgiFastStream, settings: ServiceSettings) -> None:
    """Serve the app's broker, ``/health`` and ``/metrics`` until SIGTERM or SIGINT."""
    uvicorn.run(
        app,
        host=settings.http_host,
        port=settings.http_port,
        log_level=settings.log_level.lower(),
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=30,
    )
