"""A browser's sign-in: a random id in an ``HttpOnly``, ``SameSite=Strict`` cookie, the token it
was signed in with kept here (never in the browser after the sign-in form), and a CSRF token
every form posts back. Bounded: the least recently used sign-in goes first, an idle one ends."""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

COOKIE = "kbus_console"


@dataclass
class SignIn:
    token: str
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    used: float = field(default_factory=time.monotonic)


class SignIns:
    """The signed-in browsers, by cookie id."""

    def __init__(self, most: int, idle_s: float) -> None:
        self.most = most
        self.idle_s = idle_s
        self._held: OrderedDict[str, SignIn] = OrderedDict()

    def start(self, token: str) -> str:
        """A new sign-in for ``token``: its cookie id."""
        cookie = secrets.token_urlsafe(32)
        self._held[cookie] = SignIn(token)
        while len(self._held) > self.most:
            self._held.popitem(last=False)
        return cookie

    def of(self, cookie: str | None) -> SignIn | None:
        """The sign-in a cookie names (None: none, or it ended)."""
        held = self._held.get(cookie or "")
        if held is None:
            return None
        if time.monotonic() - held.used > self.idle_s:
            del self._held[cookie or ""]
            return None
        held.used = time.monotonic()
        self._held.move_to_end(cookie or "")
        return held

    def end(self, cookie: str | None) -> None:
        self._held.pop(cookie or "", None)


def csrf_ok(held: SignIn, sent: str | None) -> bool:
    """Whether a form carried the sign-in's CSRF token."""
    return hmac.compare_digest(held.csrf.encode(), (sent or "").encode())
