"""The server's configuration, the accounts and the credential files: ``python -m kbus_dev
nats-auth``.

nats-server runs in operator mode with its built-in account resolver (``resolver: full``):
the configuration names the operator and holds the system's and kbus's accounts; each tenant's
account is a JWT the server keeps in its resolver directory, pushed to it while it runs
(``$SYS.REQ.CLAIMS.UPDATE``) and removed the same way (``$SYS.REQ.CLAIMS.DELETE``). Adding,
changing or removing a tenant or a credential touches no other tenant and reloads nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbus_contract.topology import Topology

from kbus_dev.natsauth.jwts import NKey, creds, decode, encode, nats_limits
from kbus_dev.natsauth.services import service_permissions
from kbus_dev.natsauth.tenants import activate, exports, imports, tenant_permissions
from kbus_dev.natsauth.users import (
    KBUS_ACCOUNT,
    SERVICES,
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
    for account in list(keys.accounts):
        if account not in (SYSTEM_ACCOUNT, KBUS_ACCOUNT, *wanted.values()):
            keys.remove_account(account)
    for name, account in wanted.items():
        keys.accounts.setdefault(account, NKey.new("account"))
        keys.user(name, account)


# -- the JWTs -----------------------------------------------------------------------------------


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
    if "imports" in claims:
        claims["imports"] = activate(claims["imports"], key.public, keys.accounts[KBUS_ACCOUNT])
    return encode(claims, keys.operator, key.public, account)


def _says(token: str, claims: dict[str, Any], subject: str, issuer: str) -> bool:
    """Whether a JWT says ``claims`` about ``subject``, from ``issuer`` (activations aside:
    they follow from the imports, the subject and the issuer)."""
    old = decode(token)
    said = {key: value for key, value in old["nats"].items() if key != "version"}
    for entry in said.get("imports", ()):
        entry.pop("token", None)
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


def user_jwt(keys: Keys, name: str, perms: Permissions, before: str | None = None) -> str:
    """A user's JWT, signed by its account: what it may publish and subscribe to; ``before``
    if it says the same."""
    claims = _user_claims(perms)
    account, user = keys.accounts[keys.homes[name]], keys.users[name]
    if before is not None and _says(before, claims, user.public, account.public):
        return before
    return encode(claims, account, user.public, name)


def user_creds(keys: Keys, name: str, perms: Permissions, before: str | None = None) -> str:
    """What a user connects with: its JWT and its seed (``before``, the credentials written
    last time, if they say the same)."""
    old = _jwt_of(before) if before else None
    return creds(user_jwt(keys, name, perms, old), keys.users[name])


def _jwt_of(creds_text: str) -> str | None:
    lines = creds_text.splitlines()
    for number, line in enumerate(lines[:-1]):
        if "BEGIN NATS USER JWT" in line:
            return lines[number + 1]
    return None


def system_creds(keys: Keys, before: str | None = None) -> str:
    """The system account's user: it pushes and removes accounts."""
    return user_creds(keys, SYSTEM_USER, Permissions(), before)


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
        '  interval: "2m"',
        '  timeout: "5s"',
        "}",
        "resolver_preload: " + json.dumps(preload, indent=2),
    ]
    return "\n".join(lines) + "\n"


# -- pushing accounts to a running server -------------------------------------------------------


@dataclass
class Plan:
    """What a run of nats-auth leaves to do on the running servers."""

    keys: Keys
    #: Every account's JWT (kbus's and each tenant's), by name.
    accounts: dict[str, str]
    #: The accounts whose JWT changed in this run, by name.
    changed: set[str]
    #: The public keys of the accounts removed in this run.
    removed: list[str]


async def push(url: str, plan: Plan, **options: Any) -> list[str]:
    """Send the servers the account JWTs that changed or that they lack, and remove the removed
    accounts, as the system user; what the servers answered, one line each (a refusal
    raises)."""
    from nats import connect
    from nats.aio.client import RawCredentials

    keys = plan.keys
    nc = await connect(url, user_credentials=RawCredentials(system_creds(keys)), **options)
    said: list[str] = []
    try:
        listed = await nc.request("$SYS.REQ.CLAIMS.LIST", b"", timeout=10)
        held = set(json.loads(listed.data)["data"])
        for name, token in plan.accounts.items():
            if name in plan.changed or keys.accounts[name].public not in held:
                said.append(f"{name}: " + await _ask(nc, "$SYS.REQ.CLAIMS.UPDATE", token))
        if plan.removed:
            request = encode(
                {"type": "generic", "accounts": plan.removed}, keys.operator, keys.operator.public
            )
            said.append(await _ask(nc, "$SYS.REQ.CLAIMS.DELETE", request))
    finally:
        await nc.close()
    return said


async def _ask(nc: Any, subject: str, token: str) -> str:
    reply = json.loads((await nc.request(subject, token.encode(), timeout=10)).data)
    if "error" in reply:
        raise RuntimeError(f"{subject}: {reply['error'].get('description', reply['error'])}")
    return str(reply["data"].get("message", reply["data"]))


# -- the files ----------------------------------------------------------------------------------


def k8s_secret(name: str, values: dict[str, str]) -> str:
    """A Kubernetes Secret holding ``values``."""
    lines = ["apiVersion: v1", "kind: Secret", "metadata:", f"  name: {name}", "type: Opaque"]
    lines += ["stringData:", *(f"  {key}: {json.dumps(value)}" for key, value in values.items())]
    return "\n".join(lines) + "\n"


def k8s_config_map(name: str, values: dict[str, str]) -> str:
    """A Kubernetes ConfigMap holding ``values``."""
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata:", f"  name: {name}"]
    lines += ["data:", *(f"  {key}: {json.dumps(value)}" for key, value in values.items())]
    return "\n".join(lines) + "\n"


def credential_file(credential: Credential, user_creds_text: str, prefix: str) -> dict[str, object]:
    """What the holder of a credential connects with (KbClient, the CLI, the MCP server)."""
    from kbus_dev.natsauth.users import inbox

    return {
        "user": credential.name,
        "creds": user_creds_text,
        "inbox_prefix": inbox(credential.name),
        "tenant": credential.tenant,
        "libraries": list(credential.libraries) if credential.libraries else None,
        "rights": "write" if credential.write else "read",
        # None: it may act for anyone; a list: only for these; empty: for no one.
        "acts_for": list(credential.acts_for) if credential.acts_for is not None else None,
        "bus_prefix": prefix,
    }


def written(
    t: Topology, keys: Keys, credentials: Sequence[Credential], out: Path, resolver_dir: str
) -> dict[str, str]:
    """Every file ``nats-auth`` writes, by name; a JWT that says what the one in ``out`` said is
    kept as it was."""

    def before(name: str) -> str | None:
        path = out / name
        return path.read_text() if path.is_file() else None

    def held(name: str) -> str | None:
        text = before(f"credential-{name}.json")
        return str(json.loads(text)["creds"]) if text else None

    users = permissions(t, credentials)
    services = {
        name: user_creds(keys, name, users[name], before(f"{name}.creds")) for name in SERVICES
    }
    files = {
        "keys.json": keys.dump() + "\n",
        "operator.jwt": operator_jwt(keys, before("operator.jwt")),
        "system.creds": system_creds(keys, before("system.creds")),
        "nats-users-secret.yaml": k8s_secret("kbus-nats-users", services),
        **{f"{name}.creds": text for name, text in services.items()},
    }
    for account in (SYSTEM_ACCOUNT, KBUS_ACCOUNT, *tenants_of(credentials)):
        name = f"account-{account}.jwt"
        files[name] = account_jwt(t, keys, account, before(name))
    preloaded = {a: files[f"account-{a}.jwt"] for a in (SYSTEM_ACCOUNT, KBUS_ACCOUNT)}
    files["auth.conf"] = server_config(keys, files["operator.jwt"], preloaded, resolver_dir)
    for credential in credentials:
        text = user_creds(keys, credential.name, users[credential.name], held(credential.name))
        record = credential_file(credential, text, t.prefix)
        files[f"credential-{credential.name}.json"] = json.dumps(record, indent=2) + "\n"
        files[f"credential-{credential.name}-secret.yaml"] = k8s_secret(
            f"kbus-credential-{credential.name}", {"credential.json": json.dumps(record)}
        )
    return files


def provision(
    out: Path,
    credentials: Sequence[Credential],
    *,
    prefix: str = "",
    rotate: Sequence[str] = (),
    resolver_dir: str = "jwt",
) -> Plan:
    """Write the installation's files for these credentials; what is left to push."""
    t = Topology(prefix)
    keys = Keys.load(out / "keys.json")
    before = dict(keys.accounts)
    reconcile(keys, credentials, rotate)
    removed = [key.public for name, key in before.items() if name not in keys.accounts]
    out.mkdir(parents=True, exist_ok=True)
    files = written(t, keys, credentials, out, resolver_dir)
    for stale in [*out.glob("credential-*"), *out.glob("account-*.jwt")]:
        if stale.name not in files:
            stale.unlink()  # a credential or tenant left out of the list is removed
    plan = Plan(keys, {}, set(), removed)
    for name, text in files.items():
        account = name.removeprefix("account-").removesuffix(".jwt")
        pushed = name.startswith("account-") and account != SYSTEM_ACCOUNT  # SYS: preloaded
        if pushed:
            plan.accounts[account] = text
        path = out / name
        if path.is_file() and path.read_text() == text:
            continue
        if pushed:
            plan.changed.add(account)
        path.write_text(text)
        path.chmod(0o600)
    return plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbus_dev nats-auth", description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--prefix", default="", help="bus prefix of the installation")
    parser.add_argument(
        "--credential",
        action="append",
        default=[],
        metavar="NAME=TENANT[:LIB+LIB][:read|write]",
        help="a tenant's credential (repeat); just TENANT: every library, read and write",
    )
    parser.add_argument(
        "--rotate", action="append", default=[], metavar="USER", help="a new key for USER"
    )
    parser.add_argument(
        "--resolver-dir", default="jwt", help="where nats-server keeps the accounts' JWTs"
    )
    parser.add_argument(
        "--push", metavar="NATS_URL", help="send the accounts to this running server"
    )
    args = parser.parse_args(argv)
    credentials = [Credential.parse(text) for text in args.credential]
    plan = provision(
        args.out,
        credentials,
        prefix=args.prefix,
        rotate=args.rotate,
        resolver_dir=args.resolver_dir,
    )
    print(f"wrote auth.conf, keys and credentials to {args.out} (keep them secret)")
    if args.push:
        for line in asyncio.run(push(args.push, plan)):
            print(line)
    else:
        print("start nats-server with auth.conf, then run again with --push NATS_URL")
    return 0
