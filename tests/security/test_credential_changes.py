"""A credential holds exactly what it was last given (docs/security.md, "Changing
credentials"): random sequences of adding, narrowing, widening, rotating and dropping three
credentials of one tenant, pushed to the running server as an operator does, with a live
connection and a kept copy of every credential file ever issued. After each step: every file
but the current one of each credential is refused, every connection made with an earlier file
is closed, and the current file connects holding exactly the rights of the credential's
current spec (its JWT's permissions are those nats-auth derives for it, nothing more)."""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import replace

import nats
import pytest
from kbus_contract.renewing import claims_of
from kbus_dev.natsauth import Credential, inbox
from kbus_dev.natsauth.tenants import tenant_permissions
from nats.aio.client import Client, RawCredentials

from tests.security.conftest import CREDENTIALS, LIBRARIES, TOPOLOGY, Locked

TENANT = "t3"
NAMES = ("t3-r1", "t3-r2", "t3-r3")
STEPS = 12


def _random_spec(rng: random.Random, name: str) -> Credential:
    libraries = rng.choice([None, ("lib-a",), ("lib-b",), tuple(LIBRARIES)])
    acts_for = rng.choice([(), None, ("g01",), ("g01", "g02")])
    return Credential(name, TENANT, libraries, rng.random() < 0.5, acts_for)


async def _connects(locked: Locked, name: str, creds: str) -> Client | None:
    try:
        return await nats.connect(
            locked.nats_url,
            user_credentials=RawCredentials(creds),
            inbox_prefix=inbox(name),
            max_reconnect_attempts=0,
            allow_reconnect=False,
        )
    except Exception:  # authorization refused
        return None


async def _closed(nc: Client) -> bool:
    for _ in range(50):  # the server closes a revoked user's connections as the JWT lands
        if not nc.is_connected:
            return True
        await asyncio.sleep(0.1)
    return False


@pytest.mark.parametrize("seed", [1, 2])
async def test_after_any_change_every_file_and_connection_holds_exactly_the_current_rights(
    locked: Locked, seed: int
) -> None:
    rng = random.Random(seed)
    current: dict[str, Credential] = {}
    issued: list[tuple[str, str]] = []  # every (name, creds) ever written
    live: list[tuple[str, str, Client]] = []  # (name, creds it was made with, connection)
    try:
        for _ in range(STEPS):
            name = rng.choice(NAMES)
            rotate: list[str] = []
            if name not in current:
                current[name] = _random_spec(rng, name)
            else:
                action = rng.choice(["change", "change", "rotate", "drop"])
                if action == "change":  # narrower or wider, or the same again
                    current[name] = replace(
                        _random_spec(rng, name), libraries=rng.choice([None, ("lib-a",)])
                    )
                elif action == "rotate":
                    rotate = [name]
                else:
                    del current[name]
            await locked.provision([*CREDENTIALS, *current.values()], rotate=rotate)
            for held in current.values():
                creds = locked.creds[held.name]
                issued.append((held.name, creds))
                nc = await _connects(locked, held.name, creds)
                assert nc is not None, f"{held.spec}: its current file is refused"
                live.append((held.name, creds, nc))
                claims = claims_of(creds)["nats"]
                assert isinstance(claims, dict)
                wanted = tenant_permissions(TOPOLOGY, held)
                assert sorted(claims["pub"]["allow"]) == sorted(wanted.publish), held.spec
                assert sorted(claims["sub"]["allow"]) == sorted(wanted.subscribe), held.spec
            now = {h.name: locked.creds[h.name] for h in current.values()}
            for held_name, creds in issued:
                if now.get(held_name) != creds:
                    assert await _connects(locked, held_name, creds) is None, held_name
            for held_name, creds, nc in live:
                if now.get(held_name) != creds:
                    assert await _closed(nc), f"{held_name}'s earlier connection is still open"
    finally:
        for _, _, nc in live:
            with contextlib.suppress(Exception):
                await nc.close()
        await locked.provision(CREDENTIALS)
