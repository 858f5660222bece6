"""Lanes: each tenant's work waits in two queues at every stage, interactive ahead of bulk.

A stage serves the tenants with work waiting in turn (fair share, ``kbus_runtime.fairness``);
within a tenant, what a person is waiting for (an edit, published as interactive) goes ahead of
the tenant's bulk work. A subject's lane is in its form: an interactive subject ends in
:data:`INTERACTIVE_TOKEN` (``document.added.{tenant}.{library}.interactive``), so the server's
consumers can take each lane of each tenant on its own.
"""

from __future__ import annotations

from enum import StrEnum


class Lane(StrEnum):
    """Which of a tenant's queues a message waits in."""

    #: Imports and syncs: served in turn with the tenant's other bulk work.
    BULK = "bulk"
    #: Something a person waits for: served before the tenant's bulk work.
    INTERACTIVE = "interactive"


#: The last token of every interactive subject.
INTERACTIVE_TOKEN = "interactive"


def lane_of_form(form: str) -> Lane:
    """The lane of a subject form of the catalog."""
    return Lane.INTERACTIVE if form.endswith(f".{INTERACTIVE_TOKEN}") else Lane.BULK
