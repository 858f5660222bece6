"""Cohere, as every service that calls it does: a client from the settings, and its errors
as kbus's (a request Cohere refuses is permanent, anything else may pass)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from kbus_contract.errors import ErrorCode, PermanentError, TransientError

from kbus_runtime.settings import CohereSettings

if TYPE_CHECKING:
    import cohere


def async_client(settings: CohereSettings, purpose: str) -> cohere.AsyncClientV2:
    """An async client (``purpose`` names what needs it when no key is configured)."""
    import cohere

    return cohere.AsyncClientV2(**settings.client_options(purpose))


def client(settings: CohereSettings, purpose: str) -> cohere.ClientV2:
    """A blocking client, for a caller that runs on a worker thread."""
    import cohere

    return cohere.ClientV2(**settings.client_options(purpose))


@contextlib.contextmanager
def calling(what: str) -> Iterator[None]:
    """A Cohere call (``what``: "embed", "rerank", "chat"), its errors made kbus's."""
    import cohere

    try:
        yield
    except cohere.errors.BadRequestError as exc:
        raise PermanentError(
            f"Cohere refused the {what} request: {exc}", code=ErrorCode.COHERE
        ) from exc
    except Exception as exc:
        raise TransientError(f"Cohere {what} failed: {exc}", code=ErrorCode.COHERE) from exc
