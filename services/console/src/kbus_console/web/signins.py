"""A browser's sign-in: a random id in an ``HttpOnly``, ``SameSite=Strict`` cookie, the token it
was signed in with kept here (never in the browser after the sign-in form), and a CSRF token
every form posts back. Bounded per tenant and in all (the least recently used goes first, an
idle one ends): one tenant signing in again and again ends only its own sign-ins."""

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
    tenant: str = ""
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    used: float = field(default_factory=time.monotonic)


class SignIns:
    """The signed-in browsers, by cookie id."""

    def __init__(self, most: int, per_tenant: int, idle_s: float) -> None:
        self.most = most
        self.per_tenant = per_tenant
        self.idle_s = idle_s
        self._held: OrderedDict[str, SignIn] = OrderedDict()

    def start(self, token: str, tenant: str) -> str:
        """A new sign-in for ``token`` of ``tenant``: its cookie id."""
        cookie = secrets.token_urlsafe(32)
        self._held[cookie] = SignIn(token, tenant)
        mine = [c for c, held in self._held.items() if held.tenant == tenant]
        for old in mine[: max(0, len(mine) - self.per_tenant)]:
            del self._held[old]
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
