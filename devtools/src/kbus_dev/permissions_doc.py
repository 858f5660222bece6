"""Every permission each kind of credential holds, generated into docs/security.md.

The list is made from the same code that makes the server's configuration
(:mod:`kbus_dev.natsauth`), for an example installation: tenant ``acme`` with a credential of
every library, one of library ``hr``, and a read-only one of ``faq`` and ``hr``. A permission
added to the code changes the list, and ``make lint``'s test fails until the docs say it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kbus_contract.topology import Topology

from kbus_dev import docblocks
from kbus_dev.natsauth import (
    KBUS_ACCOUNT,
    SERVICES,
    Credential,
    Permissions,
    exports,
    imported,
    permissions,
)

PAGE = Path("docs/security.md")
BLOCK = "permissions"
EXAMPLE = [
    Credential.parse("acme"),
    Credential.parse("acme-hr=acme:hr"),
    Credential.parse("acme-bot=acme:faq+hr:read"),
    Credential.parse("acme-support=acme:faq:read:as=support+sales"),
    Credential.parse("acme-ops=acme:read:as=*"),
]


def _code(items: list[str]) -> str:
    return ", ".join(f"`{item}`" for item in items) or "nothing"


def _user(name: str, held: Permissions, what: str) -> list[str]:
    lines = [f"- **{name}** ({what})", f"  - publish: {_code(held.publish)}"]
    lines.append(f"  - subscribe: {_code(held.subscribe)}")
    if held.allow_responses:
        lines.append("  - replies to the requests it receives (`allow_responses`)")
    return lines


def _describe(credential: Credential) -> str:
    libraries = "every library" if credential.libraries is None else "+".join(credential.libraries)
    rights = "read and write" if credential.write else "read only"
    acts = credential.acts_for
    acting = "" if acts == () else ", acts for " + ("anyone" if acts is None else "+".join(acts))
    return f"tenant {credential.tenant}, {libraries}, {rights}{acting}"


def listing(t: Topology | None = None) -> str:
    """The markdown list."""
    t = t or Topology()
    users = permissions(t, EXAMPLE)
    lines = ["**Tenant account `acme`** (no JetStream of its own). Its users:", ""]
    for credential in EXAMPLE:
        lines += _user(credential.name, users[credential.name], _describe(credential))
    lines += ["", "It imports from kbus's account, and nothing else:", ""]
    for _, kind, subject in imported(t, "acme"):
        lines.append(f"- {kind} `{subject}`")
    lines += [
        "",
        f"**kbus's account `{KBUS_ACCOUNT}`** exports (an account takes only what the JWT "
        "kbus signs for it imports):",
        "",
    ]
    for entry in exports(t):
        lines.append(f"- {entry['type']} `{entry['subject']}`")
    lines += ["", "Its users, kbus's services and the admin jobs:", ""]
    for name in SERVICES:
        lines += _user(name, users[name], "service" if name != "admin" else "setup and admin jobs")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbus_dev permissions-doc")
    parser.add_argument("--check", action="store_true", help="fail if the docs are out of date")
    args = parser.parse_args(argv)
    return docblocks.update(PAGE, BLOCK, listing(), check=args.check)
