"""The server's configuration, the accounts and the credential files: ``python -m kbus_dev
nats-auth``.

nats-server runs in operator mode with its built-in account resolver (``resolver: full``):
the configuration names the operator and holds the system's and kbus's accounts; each tenant's
account is a JWT the server keeps in its resolver directory, pushed to it while it runs
(:mod:`kbus_dev.natsauth.push`). Adding, changing or removing a tenant or a credential touches
no other tenant and reloads nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Collection, Sequence
from pathlib import Path

from kbus_client import CredentialFile
from kbus_contract.topology import Topology
from pydantic import SecretStr

from kbus_dev.natsauth.claims import (
    LIFETIME_S,
    account_jwt,
    operator_jwt,
    permissions,
    server_config,
    system_creds,
    tenants_of,
    user_creds,
)
from kbus_dev.natsauth.keys import Keys, reconcile
from kbus_dev.natsauth.push import Plan, push
from kbus_dev.natsauth.users import KBUS_ACCOUNT, SERVICES, SYSTEM_ACCOUNT, Credential

#: The credential list of the last run (what ``--add`` and ``--drop`` change).
LIST = "credentials.txt"
#: How each credential's files are named after it (``credential-NAME`` and these).
CREDENTIAL_FILES = (".json", "-secret.yaml")


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


def credential_file(credential: Credential, user_creds_text: str, prefix: str) -> CredentialFile:
    """What the holder of a credential connects with (KbClient, the CLI, the MCP server)."""
    from kbus_dev.natsauth.users import inbox

    return CredentialFile(
        user=credential.name,
        creds=SecretStr(user_creds_text),
        inbox_prefix=inbox(credential.name),
        tenant=credential.tenant,
        libraries=credential.libraries,
        rights="write" if credential.write else "read",
        acts_for=credential.acts_for,
        bus_prefix=prefix,
    )


def written(
    t: Topology,
    keys: Keys,
    credentials: Sequence[Credential],
    out: Path,
    resolver_dir: str,
    touched: Collection[str] | None = None,
    lifetime_s: float = LIFETIME_S,
) -> dict[str, str]:
    """Every file ``nats-auth`` writes, by name (of the tenants in ``touched`` only, when
    given: the others' are as they were); a JWT that says what the one in ``out`` said is kept
    as it was, unless it is due for renewal (users' JWTs end ``lifetime_s`` after they are
    issued)."""

    def before(name: str) -> str | None:
        path = out / name
        return path.read_text() if path.is_file() else None

    def held(name: str) -> str | None:
        text = before(f"credential-{name}.json")
        return CredentialFile.model_validate_json(text).creds.get_secret_value() if text else None

    if touched is not None:
        credentials = [c for c in credentials if c.tenant in touched]
    users = permissions(t, credentials)
    services = {
        name: user_creds(keys, name, users[name], before(f"{name}.creds"), lifetime_s)
        for name in SERVICES
    }
    files = {
        "keys.json": keys.dump() + "\n",
        "operator.jwt": operator_jwt(keys, before("operator.jwt")),
        "system.creds": system_creds(keys, before("system.creds"), lifetime_s),
        "nats-users-secret.yaml": k8s_secret("kbus-nats-users", services),
        **{f"{name}.creds": text for name, text in services.items()},
    }
    for account in (SYSTEM_ACCOUNT, KBUS_ACCOUNT, *tenants_of(credentials)):
        name = f"account-{account}.jwt"
        files[name] = account_jwt(t, keys, account, before(name))
    preloaded = {a: files[f"account-{a}.jwt"] for a in (SYSTEM_ACCOUNT, KBUS_ACCOUNT)}
    files["auth.conf"] = server_config(keys, files["operator.jwt"], preloaded, resolver_dir)
    for credential in credentials:
        text = user_creds(
            keys, credential.name, users[credential.name], held(credential.name), lifetime_s
        )
        record = credential_file(credential, text, t.prefix)
        json_file, secret_file = (f"credential-{credential.name}{end}" for end in CREDENTIAL_FILES)
        files[json_file] = record.text(indent=2) + "\n"
        files[secret_file] = k8s_secret(
            f"kbus-credential-{credential.name}", {"credential.json": record.text()}
        )
    return files


def provision(
    out: Path,
    credentials: Sequence[Credential],
    *,
    prefix: str = "",
    rotate: Sequence[str] = (),
    resolver_dir: str = "jwt",
    touched: Collection[str] | None = None,
    lifetime_s: float = LIFETIME_S,
) -> Plan:
    """Write the installation's files for these credentials (the whole list); what is left to
    push. ``touched``: the only tenants whose credentials may have changed (the others' files
    and accounts are not made again: a change costs the same at any number of tenants).
    ``lifetime_s``: how long a user's JWT issued now lasts."""
    t = Topology(prefix)
    keys = Keys.load(out / "keys.json")
    before = dict(keys.accounts)
    revoked = reconcile(keys, credentials, rotate, touched)
    removed = [key.public for name, key in before.items() if name not in keys.accounts]
    out.mkdir(parents=True, exist_ok=True)
    files = written(t, keys, credentials, out, resolver_dir, touched, lifetime_s)
    _remove_stale(out, keys, credentials, before, touched)
    files[LIST] = "".join(f"{c.spec}\n" for c in credentials)
    plan = Plan(keys, {}, set(), removed, complete=touched is None, revoked=revoked)
    for name, text in files.items():
        account = name.removeprefix("account-").removesuffix(".jwt")
        pushed = name.startswith("account-") and account != SYSTEM_ACCOUNT  # SYS: preloaded
        if pushed:
            plan.accounts[account] = text
        path = out / name
        if path.is_file() and path.read_text() == text:
            continue
        if name.endswith((".creds", ".json")) and path.is_file() and name != "keys.json":
            plan.reissued.append(name)
        if pushed:
            plan.changed.add(account)
        path.write_text(text)
        path.chmod(0o600)
    return plan


def _remove_stale(
    out: Path,
    keys: Keys,
    credentials: Sequence[Credential],
    accounts_before: Collection[str],
    touched: Collection[str] | None,
) -> None:
    """The files of credentials and tenants left out of the list removed: of the touched
    tenants' credentials in the last run's list and the accounts removed (no directory listing
    of every tenant's files), or every file no one is given when the whole list was."""
    names = {f"account-{a}.jwt" for a in keys.accounts}
    names |= {f"credential-{c.name}{end}" for c in credentials for end in CREDENTIAL_FILES}
    if touched is None:
        candidates = [*out.glob("credential-*"), *out.glob("account-*.jwt")]
    else:
        listed = _listed(out, touched)
        gone = {c.name for c in listed} - {c.name for c in credentials}
        candidates = [out / f"credential-{n}{end}" for n in gone for end in CREDENTIAL_FILES]
        candidates += [out / f"account-{a}.jwt" for a in set(accounts_before) - set(keys.accounts)]
    for stale in candidates:
        if stale.name not in names:
            stale.unlink(missing_ok=True)


def _tenant_of(spec: str) -> str:
    """The tenant a credential's line names, read without parsing the rest."""
    return (spec.partition("=")[2] if "=" in spec else spec).split(":")[0]


def _listed(out: Path, tenants: Collection[str] | None = None) -> list[Credential]:
    """The last run's credential list (of ``tenants`` only, when given)."""
    path = out / LIST
    lines = path.read_text().split() if path.is_file() else []
    if tenants is not None:  # NAME=TENANT:... (or just TENANT), read before parsing
        lines = [s for s in lines if _tenant_of(s) in tenants]
    return [Credential.parse(line) for line in lines]


def edited(
    out: Path, add: Sequence[Credential], drop: Sequence[str]
) -> tuple[list[Credential], set[str]]:
    """The last run's list with credentials added (or replaced, by name) and dropped; and the
    tenants whose credentials that changes."""
    listed = _listed(out)
    names = {c.name for c in add} | set(drop)
    touched = {c.tenant for c in listed if c.name in names} | {c.tenant for c in add}
    missing = set(drop) - {c.name for c in listed}
    if missing:
        raise SystemExit(f"no such credential: {', '.join(sorted(missing))}")
    return [*(c for c in listed if c.name not in names), *add], touched


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_s(text: str) -> float:
    """Seconds in ``90s``, ``15m``, ``12h`` or ``7d``."""
    number, unit = text[:-1], text[-1:]
    if unit not in _UNITS or not number.isdigit() or int(number) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 90s, 12h or 7d")
    return float(int(number) * _UNITS[unit])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbus_dev nats-auth", description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--prefix", default="", help="bus prefix of the installation")
    spec = "NAME=TENANT[:LIB+LIB][:read|write][:as=P+P|as=*]"
    parser.add_argument(
        "--credential",
        action="append",
        default=[],
        metavar=spec,
        help="the whole list, one credential each (repeat); just TENANT: every library, read "
        "and write; a credential left out is revoked",
    )
    parser.add_argument(
        "--add",
        action="append",
        default=[],
        metavar=spec,
        help="add (or change) a credential of the last run's list: only its tenant is made again",
    )
    parser.add_argument(
        "--drop", action="append", default=[], metavar="NAME", help="revoke a credential"
    )
    parser.add_argument(
        "--rotate", action="append", default=[], metavar="USER", help="a new key for USER"
    )
    parser.add_argument(
        "--renew",
        action="store_true",
        help="issue again every JWT of the last run's list with less than a third of its "
        "lifetime left (run daily: holders move to the renewed file before the old one ends)",
    )
    parser.add_argument(
        "--lifetime",
        type=duration_s,
        default=LIFETIME_S,
        metavar="DURATION",
        help="how long a user's JWT issued by this run lasts, as 90s, 12h or 7d (default 7d)",
    )
    parser.add_argument(
        "--resolver-dir", default="jwt", help="where nats-server keeps the accounts' JWTs"
    )
    parser.add_argument(
        "--push", metavar="NATS_URL", help="send the accounts to this running server"
    )
    args = parser.parse_args(argv)
    if sum(map(bool, (args.credential, args.add or args.drop, args.renew))) > 1:
        parser.error("give the whole list (--credential), changes to it (--add, --drop) or --renew")
    touched: set[str] | None = None
    credentials = [Credential.parse(text) for text in args.credential]
    if args.renew:
        credentials = _listed(args.out)
    elif args.add or args.drop:
        added = [Credential.parse(text) for text in args.add]
        credentials, touched = edited(args.out, added, args.drop)
    plan = provision(
        args.out,
        credentials,
        prefix=args.prefix,
        rotate=args.rotate,
        resolver_dir=args.resolver_dir,
        touched=touched,
        lifetime_s=args.lifetime,
    )
    print(f"wrote auth.conf, keys and credentials to {args.out} (keep them secret)")
    for line in plan.revoked:
        print(line)
    if plan.reissued:
        print(f"issued {len(plan.reissued)} credential files again (renewed or changed)")
    if args.push:
        for line in asyncio.run(push(args.push, plan)):
            print(line)
    else:
        print("start nats-server with auth.conf, then run again with --push NATS_URL")
    return 0
