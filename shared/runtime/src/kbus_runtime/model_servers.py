"""A model server over HTTP, called the same way by every backend that uses one (the
embedder's OpenAI-compatible endpoint, the reranker's rerank endpoint): where it is and the key
it wants (:func:`address`), and its ``429 Too Many Requests`` waited out (:class:`Overload`:
the pause its ``Retry-After`` asks for, else pauses doubling from :data:`FIRST_PAUSE_S`, until
the caller's patience, counted from the first try, is spent)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import httpx
from pydantic import SecretStr

#: The first pause after a 429 without ``Retry-After``, doubled each time.
FIRST_PAUSE_S = 0.5
#: Statuses that say the deployment is wrong (key, model, path), not the request: an outage.
MISCONFIGURED = frozenset({401, 403, 404})


def address(
    url: str | None, api_key: SecretStr | None, setting: str, what: str
) -> tuple[str, dict[str, str]]:
    """The server's base URL (no trailing slash) and the headers every call carries.

    Raises:
        ValueError: no URL is configured (``setting`` names where it goes; ``what`` needs it).
    """
    if url is None:
        raise ValueError(f"{what} needs {setting}")
    headers = {}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
    return url.rstrip("/"), headers


def retry_after(response: httpx.Response) -> float | None:
    """Seconds a 429 asks to wait (``Retry-After`` in seconds), if it says."""
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None


@dataclass
class Overload:
    """One call's 429s: how long to wait before the next try, within ``patience_s``."""

    patience_s: float
    waited_s: float = 0.0
    _pause_s: float = FIRST_PAUSE_S
    _started: float = field(default_factory=time.monotonic)

    def pause(self, response: httpx.Response) -> float | None:
        """How long to wait after this 429; None: the patience is spent (an outage)."""
        self.waited_s = time.monotonic() - self._started
        wait = retry_after(response)
        if wait is None:
            wait, self._pause_s = self._pause_s, self._pause_s * 2
        if self.waited_s + wait > self.patience_s:
            return None
        return wait
