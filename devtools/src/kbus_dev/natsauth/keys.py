"""Every key of an installation, kept from run to run, and what a new credential list changes
in them."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
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
    earlier JWTs no longer connect (removed or rotated credentials)."""

    operator: NKey
    accounts: dict[str, NKey]
    users: dict[str, NKey]
    #: The account each user belongs to.
    homes: dict[str, str]
    revoked: dict[str, dict[str, int]] = field(default_factory=dict)

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
        )

    def dump(self) -> str:
        return json.dumps(
            {
                "operator": self.operator.seed,
                "accounts": {name: key.seed for name, key in self.accounts.items()},
                "users": {name: key.seed for name, key in self.users.items()},
                "homes": self.homes,
                "revoked": self.revoked,
            },
            indent=2,
        )

    def user(self, name: str, account: str) -> NKey:
        """The user's key (a new one for a new user)."""
        if name not in self.users:
            self.users[name] = NKey.new("user")
            self.homes[name] = account
        return self.users[name]

    def revoke(self, name: str) -> None:
        """The user's key no longer connects; it is forgotten (a new one comes if it returns)."""
        key, account = self.users.pop(name), self.homes.pop(name)
        self.revoked.setdefault(account, {})[key.public] = int(time.time()) + 1

    def remove_account(self, account: str) -> NKey:
        self.revoked.pop(account, None)
        for name in [n for n, home in self.homes.items() if home == account]:
            del self.users[name], self.homes[name]
        return self.accounts.pop(account)


def reconcile(keys: Keys, credentials: Sequence[Credential], rotate: Sequence[str] = ()) -> None:
    """Keys made for new tenants and users; removed and rotated users revoked; the accounts of
    tenants with no credential left removed."""
    wanted = {SYSTEM_USER: SYSTEM_ACCOUNT, **dict.fromkeys(SERVICES, KBUS_ACCOUNT)}
    wanted |= {c.name: c.tenant for c in credentials}
    for name in list(keys.users):
        if wanted.get(name) != keys.homes[name] or name in rotate:
            keys.revoke(name)
    accounts = set(wanted.values())
    for account in list(keys.accounts):
        if account not in accounts:
            keys.remove_account(account)
    for name, account in wanted.items():
        if account not in keys.accounts:
            keys.accounts[account] = NKey.new("account")
        keys.user(name, account)
