"""Accounts sent to running servers (``$SYS.REQ.CLAIMS.UPDATE``) and removed from them
(``$SYS.REQ.CLAIMS.DELETE``), as the system account's user: no reload."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kbus_dev.natsauth.claims import system_creds
from kbus_dev.natsauth.jwts import encode
from kbus_dev.natsauth.keys import Keys


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
    #: Whether ``accounts`` holds every account (a run with the whole list) or only those of
    #: the tenants it changed.
    complete: bool = True
    #: The users whose earlier keys no longer connect, one line each (who and why).
    revoked: list[str] = field(default_factory=list)
    #: The credential files written again for a user who had one (renewed, changed, rotated).
    reissued: list[str] = field(default_factory=list)


async def push(url: str, plan: Plan, **options: Any) -> list[str]:
    """Send the servers the account JWTs that changed (and, after a run with the whole list,
    those they lack), and remove the removed accounts, as the system user; what the servers
    answered, one line each (a refusal raises)."""
    from nats import connect
    from nats.aio.client import RawCredentials

    keys = plan.keys
    nc = await connect(url, user_credentials=RawCredentials(system_creds(keys)), **options)
    said: list[str] = []
    try:
        held: set[str] = set()
        if plan.complete:  # the list reads every account the server holds: not for one change
            listed = await nc.request("$SYS.REQ.CLAIMS.LIST", b"", timeout=30)
            held = set(json.loads(listed.data)["data"])
        for name, token in plan.accounts.items():
            missing = plan.complete and keys.accounts[name].public not in held
            if name in plan.changed or missing:
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
