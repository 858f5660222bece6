"""The server's configuration and the credential files: ``python -m kbus_dev nats-auth``."""

from __future__ import annotations

import argparse
import json
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kbus_contract.topology import Topology

from kbus_dev.natsauth.services import service_permissions
from kbus_dev.natsauth.tenants import exports, imports, tenant_permissions
from kbus_dev.natsauth.users import KBUS_ACCOUNT, SERVICES, Credential, Permissions, inbox


def permissions(t: Topology, credentials: Sequence[Credential] = ()) -> dict[str, Permissions]:
    """Every user's permissions: kbus's services', then each tenant credential's."""
    users = service_permissions(t)
    for credential in credentials:
        users[credential.name] = tenant_permissions(t, credential)
    return users


def tenants_of(credentials: Sequence[Credential]) -> list[str]:
    return sorted({c.tenant for c in credentials})


# -- the server's configuration -----------------------------------------------------------------


def _user(name: str, password: str, perms: Permissions) -> dict[str, Any]:
    rights: dict[str, Any] = {
        "publish": {"allow": perms.publish},
        "subscribe": {"allow": perms.subscribe},
    }
    if perms.allow_responses:
        rights["allow_responses"] = True
    return {"user": name, "password": password, "permissions": rights}


def accounts(
    t: Topology, passwords: dict[str, str], credentials: Sequence[Credential] = ()
) -> dict[str, Any]:
    """The ``accounts`` block: kbus's account, and one account per tenant (no JetStream)."""
    tenants = tenants_of(credentials)
    users = permissions(t, credentials)
    result: dict[str, Any] = {
        KBUS_ACCOUNT: {
            "jetstream": "enabled",
            "users": [_user(name, passwords[name], users[name]) for name in SERVICES],
            "exports": exports(t),
        }
    }
    for tenant in tenants:
        held = [c for c in credentials if c.tenant == tenant]
        result[tenant] = {
            "users": [_user(c.name, passwords[c.name], users[c.name]) for c in held],
            "imports": imports(t, tenant),
        }
    return result


def server_config(
    t: Topology, passwords: dict[str, str], credentials: Sequence[Credential] = ()
) -> str:
    """The ``accounts`` block of nats-server's configuration (JSON is valid configuration)."""
    return "accounts: " + json.dumps(accounts(t, passwords, credentials), indent=2) + "\n"


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


def credential_file(credential: Credential, password: str, prefix: str) -> dict[str, object]:
    """What the holder of a credential connects with (KbClient, the CLI, the MCP server)."""
    return {
        "user": credential.name,
        "password": password,
        "inbox_prefix": inbox(credential.name),
        "tenant": credential.tenant,
        "libraries": list(credential.libraries) if credential.libraries else None,
        "rights": "write" if credential.write else "read",
        # None: it may act for anyone; a list: only for these; empty: for no one.
        "acts_for": list(credential.acts_for) if credential.acts_for is not None else None,
        "bus_prefix": prefix,
    }


def generate_passwords(
    credentials: Sequence[Credential] = (), kept: dict[str, str] | None = None
) -> dict[str, str]:
    """A password per user: ``kept`` ones stay (adding a tenant changes no one else's)."""
    names = [*SERVICES, *(c.name for c in credentials)]
    kept = kept or {}
    return {name: kept.get(name) or secrets.token_urlsafe(24) for name in names}


def _written(
    t: Topology, credentials: Sequence[Credential], passwords: dict[str, str]
) -> dict[str, str]:
    written = {
        "auth.conf": server_config(t, passwords, credentials),
        "passwords.json": json.dumps(passwords, indent=2) + "\n",
        "nats-users-secret.yaml": k8s_secret(
            "kbus-nats-users", {name: passwords[name] for name in SERVICES}
        ),
    }
    for credential in credentials:
        held = credential_file(credential, passwords[credential.name], t.prefix)
        written[f"credential-{credential.name}.json"] = json.dumps(held, indent=2) + "\n"
        written[f"credential-{credential.name}-secret.yaml"] = k8s_secret(
            f"kbus-credential-{credential.name}", {"credential.json": json.dumps(held)}
        )
    return written


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
        "--rotate", action="append", default=[], metavar="USER", help="a new password for USER"
    )
    args = parser.parse_args(argv)
    credentials = [Credential.parse(text) for text in args.credential]
    kept_file = args.out / "passwords.json"
    kept = json.loads(kept_file.read_text()) if kept_file.is_file() else {}
    for user in args.rotate:
        kept.pop(user, None)
    passwords = generate_passwords(credentials, kept)
    args.out.mkdir(parents=True, exist_ok=True)
    for stale in args.out.glob("credential-*"):
        stale.unlink()  # a credential left out of the list is removed
    for name, text in _written(Topology(args.prefix), credentials, passwords).items():
        path = args.out / name
        path.write_text(text)
        path.chmod(0o600)
    print(f"wrote auth.conf and credentials to {args.out} (keep them secret); reload nats-server")
    return 0
