"""Typed errors: the services turn them into acks, nacks and error replies; a reply that says
one becomes it again on the asking side (:func:`kbus_contract.wire.parse_reply`)."""

from __future__ import annotations


class KbusError(Exception):
    """Base of kbus's errors; ``code`` is stable and machine-readable.

    ``stage`` names the service that raised it when it arrived in an error reply.
    """

    code: str = "error"
    retryable: bool = False

    def __init__(self, reason: str, *, code: str | None = None, stage: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.stage = stage
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        """The readable reason (the same as :attr:`reason`)."""
        return self.reason

    def __str__(self) -> str:
        return f"{self.code}: {self.reason}"


class PermanentError(KbusError):
    """Retrying cannot help (invalid input): terminate and dead-letter with the reason."""

    code = "invalid"


class TransientError(KbusError):
    """A dependency is unavailable or slow: retry later (nack with a delay)."""

    code = "unavailable"
    retryable = True

    def __init__(
        self,
        reason: str,
        *,
        code: str | None = None,
        stage: str = "",
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(reason, code=code, stage=stage)
        self.retry_after_s = retry_after_s
