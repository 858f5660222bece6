"""Typed errors; :mod:`kbus_shared.consuming` turns them into acks, nacks and error replies."""

from __future__ import annotations


class KbusError(Exception):
    """Base of kbus's errors; ``code`` is stable and machine-readable."""

    code: str = "error"

    def __init__(self, reason: str, *, code: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        if code is not None:
            self.code = code


class PermanentError(KbusError):
    """Retrying cannot help (invalid input): terminate and dead-letter with the reason."""

    code = "invalid"


class TransientError(KbusError):
    """A dependency is unavailable or slow: retry later (nack with a delay)."""

    code = "unavailable"

    def __init__(
        self, reason: str, *, code: str | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(reason, code=code)
        self.retry_after_s = retry_after_s
