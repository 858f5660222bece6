"""The JWTs nats-server trusts: the operator's, each account's and each user's, and the server's
configuration that names them. A JWT that says what the one written before said is kept, so a
run signs (and pushes) only what changed."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from typing import Any

from kbus_contract.renewing import jwt_of
from kbus_contract.topology import Topology

from kbus_dev.natsauth.jwts import creds, decode, encode, nats_limits
from kbus_dev.natsauth.keys import Keys
from kbus_dev.natsauth.services import service_permissions
from kbus_dev.natsauth.tenants import exports, imports, tenant_permissions
from kbus_dev.natsauth.users import (
    KBUS_ACCOUNT,
    SYSTEM_ACCOUNT,
    SYSTEM_USER,
    Credential,
    Permissions,
)

#: Bytes of a protocol line nats-server takes (4 KiB by default; a service's JWT is about 8).
MAX_CONTROL_LINE = 64 * 1024


def permissions(t: Topology, credentials: Sequence[Credential] = ()) -> dict[str, Permissions]:
    """Every user's permissions: kbus's services', then each tenant credential's."""
    users = service_permissions(t)
    for credential in credentials:
        users[credential.name] = tenant_permissions(t, credential)
    return users


def tenants_of(credentials: Sequence[Credential]) -> list[str]:
    return sorted({c.tenant for c in credentials})


def operator_jwt(keys: Keys, before: str | None = None) -> str:
    """The operator's JWT, self-signed: it names the system account."""
    claims = {"type": "operator", "system_account": keys.accounts[SYSTEM_ACCOUNT].public}
    operator = keys.operator.public
    if before is not None and _says(before, claims, operator, operator):
        return before
    return encode(claims, keys.operator, operator, "kbus")


def account_claims(t: Topology, keys: Keys, account: str) -> dict[str, Any]:
    """What an account's JWT says: the system's; kbus's (JetStream, the exports to tenants); a
    tenant's (no JetStream, the imports of its own subjects); and whom it revoked."""
    claims: dict[str, Any] = {"type": "account", "limits": nats_limits(account == KBUS_ACCOUNT)}
    if account == KBUS_ACCOUNT:
        claims["exports"] = exports(t)
    elif account != SYSTEM_ACCOUNT:
        claims["imports"] = imports(t, account, keys.accounts[KBUS_ACCOUNT].public)
    if keys.revoked.get(account):
        claims["revocations"] = keys.revoked[account]
    return claims


def account_jwt(t: Topology, keys: Keys, account: str, before: str | None = None) -> str:
    """An account's JWT, signed by the operator; ``before`` (the one written last time) if it
    says the same, so that only what changed is signed and pushed."""
    claims = account_claims(t, keys, account)
    key = keys.accounts[account]
    if before is not None and _says(before, claims, key.public, keys.operator.public):
        return before
    return encode(claims, keys.operator, key.public, account)


def _says(token: str, claims: dict[str, Any], subject: str, issuer: str) -> bool:
    """Whether a JWT says ``claims`` about ``subject``, from ``issuer``."""
    old = decode(token)
    said = {key: value for key, value in old["nats"].items() if key != "version"}
    same: bool = said == json.loads(json.dumps(claims))
    return same and (old["sub"], old["iss"]) == (subject, issuer)


def _user_claims(perms: Permissions) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "type": "user",
        "pub": {"allow": perms.publish} if perms.publish else {},
        "sub": {"allow": perms.subscribe} if perms.subscribe else {},
        "subs": -1,
        "data": -1,
        "payload": -1,
    }
    if perms.allow_responses:
        claims["resp"] = {"max": 1, "ttl": 0}
    return claims


#: A user's JWT lasts this long unless nats-auth is told otherwise (``--lifetime``) ...
LIFETIME_S = 7 * 86400.0
#: ... and is issued again, for the same key, once less than this share of it is left.
RENEW_WITHIN = 1 / 3


def due(token: str, lifetime_s: float, now: float | None = None) -> bool:
    """Whether a user's JWT is to be issued again: it never ends (issued before JWTs had an
    end), or less than a third of ``lifetime_s`` is left of it."""
    ends = decode(token).get("exp")
    return ends is None or ends - (now or time.time()) < lifetime_s * RENEW_WITHIN


def user_jwt(
    keys: Keys,
    name: str,
    perms: Permissions,
    before: str | None = None,
    lifetime_s: float = LIFETIME_S,
) -> str:
    """A user's JWT, signed by its account: what it may publish and subscribe to, ending
    ``lifetime_s`` from now; ``before`` if it says the same and is not :func:`due`."""
    claims = _user_claims(perms)
    account, user = keys.accounts[keys.homes[name]], keys.users[name]
    if (
        before is not None
        and _says(before, claims, user.public, account.public)
        and not due(before, lifetime_s)
    ):
        return before
    return encode(claims, account, user.public, name, lifetime_s)


def user_creds(
    keys: Keys,
    name: str,
    perms: Permissions,
    before: str | None = None,
    lifetime_s: float = LIFETIME_S,
) -> str:
    """What a user connects with: its JWT and its seed (``before``, the credentials written
    last time, if they say the same and are not due)."""
    old = None
    if before:
        with contextlib.suppress(ValueError):  # not credentials: made anew
            old = jwt_of(before)
    return creds(user_jwt(keys, name, perms, old, lifetime_s), keys.users[name])


def system_creds(keys: Keys, before: str | None = None, lifetime_s: float = LIFETIME_S) -> str:
    """The system account's user: it pushes and removes accounts."""
    return user_creds(keys, SYSTEM_USER, Permissions(), before, lifetime_s)


def server_config(keys: Keys, operator: str, preloaded: dict[str, str], resolver_dir: str) -> str:
    """nats-server's trust: the operator, the system account, the resolver (its directory holds
    every account's JWT), and the ``preloaded`` accounts' JWTs (the system's and kbus's, by
    name)."""
    preload = {keys.accounts[name].public: token for name, token in preloaded.items()}
    lines = [
        # A client's CONNECT carries its user's JWT: a service's lists its many subjects.
        f"max_control_line: {MAX_CONTROL_LINE}",
        f"operator: {operator}",
        f"system_account: {keys.accounts[SYSTEM_ACCOUNT].public}",
        "resolver: {",
        "  type: full",
        f"  dir: {json.dumps(resolver_dir)}",
        "  allow_delete: true",
        # A removed account's JWT goes with it (not kept beside the others as .jwt.deleted).
        "  hard_delete: true",
        '  interval: "2m"',
        '  timeout: "5s"',
        "}",
        "resolver_preload: " + json.dumps(preload, indent=2),
    ]
    return "\n".join(lines) + "\n"
