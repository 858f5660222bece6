"""Run a service app under uvicorn (``python -m kbus_<service>``)."""

from __future__ import annotations

import logging
import os
import threading
import time

import uvicorn
from faststream.asgi import AsgiFastStream
from threadpoolctl import threadpool_limits

from kbus_runtime.settings import ServiceSettings

log = logging.getLogger("kbus")

#: Seconds a stopping service may spend finishing what it runs.
GRACE_S = 30
#: Seconds past the grace after which a service that has not ended is ended.
STUCK_S = 15


def serve(app: AsgiFastStream, settings: ServiceSettings) -> None:
    """Serve the app's broker, ``/health`` and ``/metrics`` until SIGTERM or SIGINT.

    BLAS runs on the calling thread: a service's model calls run on threads of its own, and
    BLAS's extra threads, spinning after each of a request's small products, took CPU from
    the other requests (docs/performance.md, "Token states kept at ingest").
    """
    threadpool_limits(1, user_api="blas")
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=settings.process.http_host,
            port=settings.http_port,
            log_level=settings.process.log_level.lower(),
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=GRACE_S,
        )
    )
    threading.Thread(target=_end_if_stuck, args=(server,), daemon=True).start()
    server.run()


def _end_if_stuck(server: uvicorn.Server) -> None:
    """Once the server stops (a signal, or a start-up that failed), end the process if stopping
    outlasts the grace: a shutdown hung on a broken connection would leave a process that
    serves nothing and that no supervisor restarts, since it never exits."""
    while not (server.should_exit or _startup_failed(server)):
        time.sleep(0.5)
    time.sleep(GRACE_S + STUCK_S)
    log.error("the service did not stop within %d s; ending it", GRACE_S + STUCK_S)
    logging.shutdown()
    os._exit(1)


def _startup_failed(server: uvicorn.Server) -> bool:
    lifespan = getattr(server, "lifespan", None)
    return bool(getattr(lifespan, "should_exit", False))
