"""Every key of an installation, kept from run to run, and what a new credential list changes
in them."""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kbus_dev.natsauth.jwts import NKey
from kbus_dev.natsauth.users import (
    KBUS_ACCOUNT,
    SERVICES,
    SYSTEM_ACCOUNT,
    SYSTEM_USER,
    Credential,
)


@dataclass
class Keys:
    """Every key of an installation (``keys.json``, secret), kept from run to run: adding a
    tenant or a credential changes no one else's. ``revoked``: by account, the users whose
    earlier JWTs no longer connect (removed, rotated or changed credentials). ``specs``: what
    each user's key was issued for (:attr:`Credential.spec`): a key holds exactly that, so a
    credential given other rights gets a new key and the old one is revoked."""

    operator: NKey
    accounts: dict[str, NKey]
    users: dict[str, NKey]
    #: The account each user belongs to.
    homes: dict[str, str]
    revoked: dict[str, dict[str, int]] = field(default_factory=dict)
    specs: dict[str, str] = field(default_factory=dict)

    @classmethod
    def new(cls) -> Keys:
        accounts = {name: NKey.new("account") for name in (SYSTEM_ACCOUNT, KBUS_ACCOUNT)}
        return cls(NKey.new("operator"), accounts, {}, {})

    @classmethod
    def load(cls, path: Path) -> Keys:
        if not path.is_file():
            return cls.new()
        data = json.loads(path.read_text())
        return cls(
            NKey.from_seed(data["operator"]),
            {name: NKey.from_seed(seed) for name, seed in data["accounts"].items()},
            {name: NKey.from_seed(seed) for name, seed in data["users"].items()},
            data["homes"],
            data.get("revoked", {}),
            data.get("specs", {}),
        )

    def dump(self) -> str:
        return json.dumps(
            {
                "operator": self.operator.seed,
                "accounts": {name: key.seed for name, key in self.accounts.items()},
                "users": {name: key.seed for name, key in self.users.items()},
                "homes": self.homes,
                "revoked": self.revoked,
                "specs": self.specs,
            },
            separators=(",", ":"),
        )

    def user(self, name: str, account: str, spec: str = "") -> NKey:
        """The user's key (a new one for a new user), issued for ``spec``."""
        if name not in self.users:
            self.users[name] = NKey.new("user")
            self.homes[name] = account
        self.specs[name] = spec
        return self.users[name]

    def revoke(self, name: str) -> None:
        """The user's key no longer connects; it is forgotten (a new one comes if it returns)."""
        key, account = self.users.pop(name), self.homes.pop(name)
        self.specs.pop(name, None)
        self.revoked.setdefault(account, {})[key.public] = int(time.time()) + 1

    def remove_account(self, account: str) -> NKey:
        self.revoked.pop(account, None)
        for name in [n for n, home in self.homes.items() if home == account]:
            del self.users[name], self.homes[name]
            self.specs.pop(name, None)
        return self.accounts.pop(account)


def reconcile(
    keys: Keys,
    credentials: Sequence[Credential],
    rotate: Sequence[str] = (),
    touched: Collection[str] | None = None,
) -> list[str]:
    """Keys made for new tenants and users; removed, rotated and changed users revoked (a
    credential narrowed, widened or moved gets a new key: a kept copy of the old file, and a
    connection made with it, hold nothing); the accounts of tenants with no credential left
    removed. ``touched``: the only tenants whose credentials may have changed (no other user
    or account is looked at: a change costs the same at any number of tenants). Returns what
    was revoked, one line each (the user and why)."""
    wanted = {SYSTEM_USER: SYSTEM_ACCOUNT, **dict.fromkeys(SERVICES, KBUS_ACCOUNT)}
    wanted |= {c.name: c.tenant for c in credentials}
    specs = {c.name: c.spec for c in credentials}
    live = set(wanted.values())
    if touched is None:
        names, accounts = list(keys.users), list(keys.accounts)
    else:
        names = [
            n
            for n, home in keys.homes.items()
            if home in touched or wanted.get(n) in touched or n in rotate
        ]
        accounts = [a for a in touched if a in keys.accounts]
    revoked = []
    for name in names:
        why = _why_revoked(keys, name, wanted, specs, rotate)
        if why is not None:
            if keys.homes[name] in live:
                revoked.append(f"revoked {name}'s earlier key ({why})")
            keys.revoke(name)
    for account in accounts:
        if account not in live:
            keys.remove_account(account)
    for name, account in wanted.items():
        if touched is not None and account not in touched and name in keys.users:
            continue
        if account not in keys.accounts:
            keys.accounts[account] = NKey.new("account")
        keys.user(name, account, specs.get(name, ""))
    return revoked


def _why_revoked(
    keys: Keys, name: str, wanted: dict[str, str], specs: dict[str, str], rotate: Sequence[str]
) -> str | None:
    """Why a user's key no longer holds (None: it still does)."""
    # A key issued before specs were kept is taken as issued for what it is given now.
    issued = keys.specs.get(name, specs.get(name, ""))
    if name not in wanted:
        return "removed"
    if wanted[name] != keys.homes[name]:
        return "moved to another tenant"
    if name in rotate:
        return "rotated"
    if issued != specs.get(name, ""):
        return f"changed from {issued}"
    return None
