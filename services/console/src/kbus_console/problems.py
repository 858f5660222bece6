"""kbus's errors as HTTP answers: ``application/problem+json`` (RFC 9457) carrying the error
code, its one sentence and whether asking again can help; the status from the code, here only."""

from __future__ import annotations

from kbus_contract.errors import OUTAGES, ErrorCode, KbusError
from starlette.responses import JSONResponse

PROBLEM = "application/problem+json"

#: Each code's status; a code not here is 400, or 503 where asking again can help.
STATUS: dict[str, int] = {
    ErrorCode.PERMISSION_DENIED: 403,
    ErrorCode.TENANT_MISMATCH: 403,
    ErrorCode.LIBRARY_MISMATCH: 403,
    ErrorCode.LIBRARY_NOT_GRANTED: 403,
    ErrorCode.PRINCIPAL_NOT_GRANTED: 403,
    ErrorCode.READ_ONLY: 403,
    ErrorCode.QUOTA_EXCEEDED: 429,
    ErrorCode.TOO_LARGE: 413,
    ErrorCode.DEADLINE_EXCEEDED: 504,
    ErrorCode.INTERNAL: 500,
    **{code: 504 for code in ErrorCode if code.endswith("_timeout")},
    **{code: 503 for code in OUTAGES if not code.endswith("_timeout")},
}
#: Statuses that are not errors of kbus's codes: the console's own.
NOT_FOUND, UNAUTHORIZED, UNSUPPORTED = 404, 401, 415


def status_of(error: KbusError) -> int:
    return STATUS.get(error.code, 503 if error.retryable else 400)


def problem(status: int, code: str, detail: str, retryable: bool = False) -> JSONResponse:
    """One problem: its status, kbus's code, the sentence to act on."""
    body = {
        "type": f"https://kbus.dev/errors/{code}",
        "title": code.replace("_", " "),
        "status": status,
        "detail": detail,
        "code": code,
        "retryable": retryable,
    }
    headers = {"Retry-After": "1"} if status in (429, 503) else None
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers)


def from_error(error: KbusError, status: int | None = None) -> JSONResponse:
    return problem(status or status_of(error), str(error.code), error.reason, error.retryable)
