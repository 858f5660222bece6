"""Logging set-up shared by the services."""

from __future__ import annotations

import logging


def configure_logging(level: str) -> None:
    """One line per event, with the time and the logger's name."""
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # httpx logs every request at INFO: Weaviate's REST calls, and the liveness check of the
    # node in use every second on a cluster. Its warnings still show.
    logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger().level))
