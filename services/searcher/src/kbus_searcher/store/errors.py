"""Weaviate's errors as kbus's: the one place that reads what the store said.

Weaviate reports a query vector of the wrong length, or an object it will not take, only in
its message text; these patterns read it, so a new Weaviate wording changes this file alone.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable
from typing import TypeVar

from kbus_contract.errors import ErrorCode, PermanentError, TransientError
from weaviate.exceptions import WeaviateBaseError

#: Seconds after which a search the store was too busy for is worth asking again (one it
#: failed for a lost node is asked again at once: another node answers).
BUSY_RETRY_S = 1.0
#: A query vector whose length does not fit the collection: the index was made by another model.
_DIMENSION_MISMATCH = re.compile(r"vector lengths|dimension", re.IGNORECASE)

#: What an object the store rejects says (retrying cannot store it).
_REJECTED = (
    "dimensions do not match",
    "vector lengths don't match",
    "vector of the wrong size",
    "invalid ",
)


def unavailable(exc: WeaviateBaseError, doing: str) -> TransientError:
    """A store call that failed for a reason a retry may not meet."""
    return TransientError(f"the store could not {doing}: {exc}", code=ErrorCode.STORE_ERROR)


def failure(exc: WeaviateBaseError, doing: str) -> PermanentError | TransientError:
    """What a failed query means: another model's index, or the store unavailable."""
    if _DIMENSION_MISMATCH.search(str(exc)):
        return PermanentError(
            f"the query vector does not fit the index ({exc}): the index was embedded "
            "by another model",
            code=ErrorCode.MODEL_MISMATCH,
        )
    return unavailable(exc, doing)


def deletion_error(failed: int, matched: int) -> TransientError:
    """A deletion a copy did not confirm (Weaviate counts it failed, and raises nothing): what
    it meant to remove may still be searchable there, so its message is delivered again."""
    return TransientError(
        f"{failed} of {matched} chunks were not deleted (a copy did not confirm it)",
        code=ErrorCode.STORE_WRITE_FAILED,
    )


def write_error(failed: int, total: int, first: str) -> PermanentError | TransientError:
    """Failed objects fail their document: permanently for data the store rejects."""
    summary = f"{failed} of {total} chunks were not stored: {first}"
    if any(marker in first for marker in _REJECTED):
        return PermanentError(summary, code=ErrorCode.STORE_REJECTED)
    return TransientError(summary, code=ErrorCode.STORE_WRITE_FAILED)


T = TypeVar("T")


async def within(asked: Awaitable[T], waits_s: float) -> T:
    """A store call's answer, or a retryable ``store_error`` once it took ``waits_s``."""
    try:
        return await asyncio.wait_for(asked, waits_s)
    except TimeoutError as exc:
        raise TransientError(
            f"the store did not answer within {waits_s:.1f}s: it is busy, ask again in "
            f"{BUSY_RETRY_S:g}s",
            code=ErrorCode.STORE_ERROR,
            retry_after_s=BUSY_RETRY_S,
        ) from exc
