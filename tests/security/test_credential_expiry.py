"""A user's JWT ends (docs/security.md, "Credentials end and are renewed"): a kept copy of a
credential file connects only until its JWT's end, and a connection made with it is closed
then; the holder of the file an operator renews (``nats-auth --renew``, run as a daily job
would be, here every two seconds against a 20-second lifetime) moves to each renewal before
the old JWT ends, and no request it makes meanwhile fails; a service reading its credential
from a file does the same."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import httpx
import nats
import pytest
from kbus_client import CredentialFile, KbClient
from kbus_contract.renewing import claims_of
from kbus_dev.natsauth import Keys, inbox, permissions, user_creds
from kbus_dev.natsauth import main as nats_auth
from kbus_dev.services import start_service, wait_healthy
from nats.aio.client import Client, RawCredentials

from tests.security.conftest import CREDENTIALS, TOPOLOGY, Locked

NAME, LIFETIME_S = "t3-brief", 20
RUN_S = 2.5 * LIFETIME_S


async def _nats_auth(locked: Locked, *args: str) -> None:
    """nats-auth as an operator runs it, pushing to the running server."""
    argv = ["--out", str(locked.auth), "--resolver-dir", locked.resolver_dir, *args]
    assert await asyncio.to_thread(nats_auth, [*argv, "--push", locked.nats_url]) == 0


async def _plain(locked: Locked, creds: str) -> Client:
    return await nats.connect(
        locked.nats_url,
        user_credentials=RawCredentials(creds),
        inbox_prefix=inbox(NAME),
        allow_reconnect=False,
    )


async def test_a_kept_file_ends_with_its_jwt_and_the_renewed_file_s_holder_never_stops(
    locked: Locked,
) -> None:
    path = locked.auth / f"credential-{NAME}.json"
    await _nats_auth(locked, "--add", f"{NAME}=t3", "--lifetime", f"{LIFETIME_S}s")
    first = CredentialFile.read(path).creds.get_secret_value()
    claims = claims_of(first)
    assert claims["exp"] - claims["iat"] == LIFETIME_S, "the JWT ends a lifetime after its issue"
    kept = await _plain(locked, first)
    reconnections = 0

    async def counted() -> None:
        nonlocal reconnections
        reconnections += 1

    client = await KbClient.connect(
        locked.nats_url, credential=CredentialFile.read(path), reconnected_cb=counted
    )
    failed: list[str] = []
    asked = 0

    async def renew_daily() -> None:
        while True:
            await _nats_auth(locked, "--renew", "--lifetime", f"{LIFETIME_S}s")
            await asyncio.sleep(2)

    renewing = asyncio.ensure_future(renew_daily())
    try:
        ends = time.time() + RUN_S
        while time.time() < ends:
            asked += 1
            try:
                await client.search("anything", libraries=["lib-a"], timeout_s=5)
            except Exception as exc:
                failed.append(f"{time.strftime('%X')}: {exc!r}")
            await asyncio.sleep(0.25)
        assert not failed, f"{len(failed)} of {asked} searches failed: {failed[:5]}"
        assert client.nc.is_connected, "the holder of the renewed file is still connected"
        assert reconnections >= 2, "it moved to each renewal (two or three in the run)"
        assert not kept.is_connected, "the connection made with the first file ended with it"
        with pytest.raises(Exception, match=r"(?i)authorization|expired"):
            await _plain(locked, first)
        await (await _plain(locked, CredentialFile.read(path).creds.get_secret_value())).close()
    finally:
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewing
        await client.close()
        with contextlib.suppress(Exception):
            await kept.close()
        await locked.provision(CREDENTIALS)


async def test_a_service_moves_to_each_renewal_of_its_mounted_credential_file(
    locked: Locked, tmp_path: Path
) -> None:
    """A second gateway whose user's JWT lasts 10 seconds, read from a file that is replaced
    (as Kubernetes replaces a mounted Secret) with a fresh JWT of the same key every three:
    healthy, its connection open, after two and a half lifetimes (without the renewals its
    connection ends at the first JWT's end and its health check fails)."""
    lifetime_s = LIFETIME_S / 2
    keys = Keys.load(locked.auth / "keys.json")
    allowed = permissions(TOPOLOGY)["gateway"]
    path = tmp_path / "user.creds"

    def renew() -> None:
        fresh = tmp_path / "user.creds.new"
        fresh.write_text(user_creds(keys, "gateway", allowed, None, lifetime_s))
        fresh.replace(path)

    renew()
    env = {**locked.service_env("gateway"), "KBUS_NATS_CREDENTIALS_FILE": str(path)}
    del env["KBUS_NATS_CREDENTIALS"]
    server = start_service("gateway", env, tmp_path, label="gateway-renewed")
    try:
        wait_healthy([server])
        ends = time.time() + 2.5 * lifetime_s
        while time.time() < ends:
            await asyncio.sleep(3)
            renew()
        async with httpx.AsyncClient() as http:
            health = await http.get(f"http://127.0.0.1:{server.ports['http']}/health")
        assert health.is_success, server.log.read_text()[-2000:]
        assert "Expired" not in server.log.read_text()
    finally:
        server.stop()
