"""Typed errors: the services turn them into acks, nacks and error replies; a reply that says
one becomes it again on the asking side (:func:`kbus_contract.wire.parse_reply`)."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Every code kbus puts in an error reply or a dead letter; the wire carries its value."""

    ERROR = "error"
    INVALID = "invalid"
    UNAVAILABLE = "unavailable"
    # The message or request itself
    INVALID_MESSAGE = "invalid_message"
    TENANT_MISMATCH = "tenant_mismatch"
    LIBRARY_MISMATCH = "library_mismatch"
    LIBRARY_NOT_GRANTED = "library_not_granted"
    PRINCIPAL_NOT_GRANTED = "principal_not_granted"
    READ_ONLY = "read_only"
    QUOTA_EXCEEDED = "quota_exceeded"
    TOO_LARGE = "too_large"
    TOO_MANY_CANDIDATES = "too_many_candidates"
    BAD_CURSOR = "bad_cursor"
    BAD_PROFILE = "bad_profile"
    NO_PROMPT = "no_prompt"
    # Documents: bodies, parsing, fetching
    BODY_MISSING = "body_missing"
    BODY_MISMATCH = "body_mismatch"
    BAD_LISTING = "bad_listing"
    EMPTY_DOCUMENT = "empty_document"
    UNREADABLE = "unreadable"
    ENCRYPTED = "encrypted"
    INVALID_TEXT = "invalid_text"
    CONTENT_TYPE_MISMATCH = "content_type_mismatch"
    UNSUPPORTED_CONTENT_TYPE = "unsupported_content_type"
    TEMPLATE_MISMATCH = "template_mismatch"
    PARSE_TIMEOUT = "parse_timeout"
    ADDRESS_REFUSED = "address_refused"
    ROBOTS_DISALLOWED = "robots_disallowed"
    TOO_MANY_REDIRECTS = "too_many_redirects"
    FETCH_FAILED = "fetch_failed"
    # Models and what they answered
    COHERE = "cohere"
    BAD_VECTOR = "bad_vector"
    MODEL_MISMATCH = "model_mismatch"
    BAD_REPLY = "bad_reply"
    MALFORMED_ANSWER = "malformed_answer"
    GENERATION_MALFORMED = "generation_malformed"
    RERANK_MALFORMED = "rerank_malformed"
    RERANK_UNCONFIGURED = "rerank_unconfigured"
    # The bus and the store
    BUS_ERROR = "bus_error"
    STORE_ERROR = "store_error"
    STORE_REJECTED = "store_rejected"
    STORE_WRITE_FAILED = "store_write_failed"
    NOT_READY = "not_ready"
    MAX_DELIVERIES = "max_deliveries"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    # A stage asked over request-reply: nobody answered, or not in time
    INGESTOR_UNAVAILABLE = "ingestor_unavailable"
    INGESTOR_TIMEOUT = "ingestor_timeout"
    EMBEDDER_UNAVAILABLE = "embedder_unavailable"
    EMBEDDER_TIMEOUT = "embedder_timeout"
    SEARCHER_UNAVAILABLE = "searcher_unavailable"
    SEARCHER_TIMEOUT = "searcher_timeout"
    RERANKER_UNAVAILABLE = "reranker_unavailable"
    RERANKER_TIMEOUT = "reranker_timeout"
    GENERATOR_UNAVAILABLE = "generator_unavailable"
    GENERATOR_TIMEOUT = "generator_timeout"
    # Append only: a code's place is its number in the gate's refusals on the wire
    # (kbus_contract.intake.refusal_number), which clients of other versions read.
    #: Something kbus did not expect (a bug): retried, and dead-lettered past max deliveries.
    INTERNAL = "internal"
    #: The bus refused the credential a subject (its rights do not reach what was asked).
    PERMISSION_DENIED = "permission_denied"

    @classmethod
    def unanswered(cls, stage: str, timed_out: bool) -> str:
        """The code of a request ``stage`` did not answer: ``<stage>_timeout|_unavailable``."""
        value = f"{stage}_{'timeout' if timed_out else 'unavailable'}"
        return cls(value) if value in cls._value2member_map_ else value


#: Codes that say a dependency is out (the store, the bus, a model or endpoint, another stage),
#: not that the message is at fault: a stage waits for it rather than dead-letter the message.
OUTAGES = frozenset(
    {
        ErrorCode.UNAVAILABLE,
        ErrorCode.BUS_ERROR,
        ErrorCode.STORE_ERROR,
        ErrorCode.STORE_WRITE_FAILED,
        ErrorCode.NOT_READY,
        ErrorCode.COHERE,
        *(code for code in ErrorCode if code.endswith(("_unavailable", "_timeout"))),
    }
)


class KbusError(Exception):
    """Base of kbus's errors; ``code`` is stable and machine-readable.

    ``stage`` names the service that raised it when it arrived in an error reply.
    """

    code: str = ErrorCode.ERROR
    retryable: bool = False
    #: How many times the client sent the request that ended in this error.
    tries: int = 1

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

    code = ErrorCode.INVALID


class TransientError(KbusError):
    """A dependency is unavailable or slow: retry later (nack with a delay)."""

    code = ErrorCode.UNAVAILABLE
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

    @property
    def outage(self) -> bool:
        """Whether it says a dependency is out rather than that the message is at fault."""
        return self.code in OUTAGES
