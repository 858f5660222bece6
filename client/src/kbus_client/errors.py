"""What a client sees when kbus cannot do what it asked."""

from __future__ import annotations


class KbError(Exception):
    """An error reply from kbus, or no reply at all."""

    def __init__(
        self, message: str, *, code: str, stage: str = "", retryable: bool = False
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.message = message
        self.code = code
        self.stage = stage
        self.retryable = retryable


class DocumentRejectedError(KbError):
    """A published document was dead-lettered instead of indexed."""
