"""The counters a stage keeps: what it processed, dead-lettered, retried, refused and answered."""

from __future__ import annotations

from functools import cached_property

from prometheus_client import CollectorRegistry, Counter


class StageMetrics:
    """The counters stages keep, declared by the services that can count with them.

    A service declares the stream counters when it registers a consumer and the request
    counters when it serves requests (so /metrics lists them, at zero, from the start); a
    service that only answers requests never declares the stream counters, and the reverse.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def declare_stream_counters(self) -> None:
        """Declare what consuming a stream counts (reading each property declares it)."""
        _ = (
            self.processed,
            self.dead_lettered,
            self.retried,
            self.refusals,
            self.handed_back,
            self.withdrawn,
        )

    def declare_request_counters(self) -> None:
        """Declare what answering requests counts."""
        _ = (self.answered, self.refusals)

    @cached_property
    def handed_back(self) -> Counter:
        return Counter(
            "kbus_messages_handed_back",
            "Stream messages a stopping replica handed back unprocessed (nak)",
            ["stage"],
            registry=self.registry,
        )

    @cached_property
    def withdrawn(self) -> Counter:
        return Counter(
            "kbus_messages_withdrawn",
            "Messages (or a large document's parts) whose work was skipped: their document was "
            "deleted or published again since (kbus_runtime.withdrawals)",
            ["stage", "reason"],
            registry=self.registry,
        )

    @cached_property
    def processed(self) -> Counter:
        return Counter(
            "kbus_messages_processed",
            "Stream messages processed successfully",
            ["stage"],
            registry=self.registry,
        )

    @cached_property
    def dead_lettered(self) -> Counter:
        return Counter(
            "kbus_messages_dead_lettered",
            "Messages sent to the dead-letter stream",
            ["stage", "code"],
            registry=self.registry,
        )

    @cached_property
    def retried(self) -> Counter:
        return Counter(
            "kbus_messages_retried",
            "Messages nacked for a later retry",
            ["stage", "code"],
            registry=self.registry,
        )

    @cached_property
    def refusals(self) -> Counter:
        return Counter(
            "kbus_tenant_refusals",
            "Messages and requests refused for what a tenant may do: a body naming another "
            "tenant or library than its subject, a library outside the grant, a quota",
            ["stage", "tenant", "code"],
            registry=self.registry,
        )

    @cached_property
    def answered(self) -> Counter:
        return Counter(
            "kbus_requests",
            "Requests answered, by outcome: ok, or the error reply's code",
            ["stage", "outcome"],
            registry=self.registry,
        )
