"""Services and tenants' credentials get only the permissions they need (the fixture's
locked-down stack: tests/security/conftest.py)."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
import weaviate
from kbus_client import KbClient
from kbus_contract import Chunker, ChunkerKind, LibraryProfile, LibraryReconciled, SyncEntry
from kbus_contract.lanes import Lane
from kbus_dev.natsauth import inbox
from kbus_dev.services import SERVICES
from nats.aio.msg import Msg

from tests.security.conftest import (
    TOPOLOGY,
    WEAVIATE_KEY,
    Locked,
    connect,
    credential,
    seeds,
)


@pytest.fixture
async def violations() -> list[str]:
    return []


async def test_the_pipeline_works_with_only_the_granted_permissions(client: KbClient) -> None:
    result = await client.publish_document(
        library="vault",
        document_id="policy",
        title="Key policy",
        text="Rotate the signing keys every ninety days and keep the old key for a week.",
        wait=True,
        timeout_s=120,
    )
    assert result.receipt is not None
    reply = await client.search("how often are keys rotated?", libraries=["vault"])
    assert reply.results[0].document_id == "policy"
    removed = await client.delete_document(library="vault", document_id="policy", wait=True)
    assert removed is not None
    assert removed.chunks_deleted == 1


async def test_a_claim_checked_document_needs_no_more_than_the_granted_permissions(
    client: KbClient,
) -> None:
    client.claim_check_bytes = 256  # every document goes through the object store
    result = await client.publish_document(
        library="vault",
        document_id="large",
        title="Retention",
        text="Audit logs are kept for seven years in the cold archive. " * 20,
        wait=True,
        timeout_s=120,
    )
    assert result.receipt is not None
    reply = await client.search("how long are audit logs kept?", libraries=["vault"])
    assert reply.results[0].document_id == "large"


async def test_a_sync_by_claim_check_needs_no_more_than_the_granted_permissions(
    client: KbClient,
) -> None:
    """The versions asked, the list published (in the tenant's store when long), read and
    removed by the searcher, what it does not list deleted, the receipt heard."""
    await client.publish_document(
        library="synced", document_id="old", text="The old badge office.", source="src", wait=True
    )
    kept = [{"document_id": "kept", "text": "The archive room is on floor two."}]
    first = await client.sync_library("synced", kept, source="src", settle_s=60)
    assert (first.receipt.added, first.receipt.deleted) == (1, 1)
    version = (await client.versions("synced", source="src"))["kept"]
    entries = [SyncEntry(document_id="kept", version=version)]
    entries += [SyncEntry(document_id=f"absent-{i}", version="v1") for i in range(1_000)]
    heard: asyncio.Queue[LibraryReconciled] = asyncio.Queue()

    async def on_receipt(msg: Msg) -> None:
        heard.put_nowait(LibraryReconciled.model_validate_json(msg.data))

    sub = await client.nc.subscribe(TOPOLOGY.reconciled("t0", "synced"), cb=on_receipt)
    sync_id = await client.publish_sync("synced", entries, source="src", settle_s=1)
    receipt = await asyncio.wait_for(heard.get(), 60)
    await sub.unsubscribe()
    assert receipt.sync_id == sync_id
    assert (receipt.unchanged, receipt.failed) == (1, 1_000)


async def test_a_read_only_credential_may_neither_sync_nor_list_versions(
    locked: Locked, violations: list[str]
) -> None:
    nc = await connect(locked, "t0-ro", violations)
    try:
        sync = {"tenant": "t0", "library": "lib-a", "documents": []}
        await nc.publish(TOPOLOGY.synced("t0", "lib-a"), json.dumps(sync).encode())
        synced = await _violation(violations)
        violations.clear()
        asked = TOPOLOGY.asked("kb.versions", "t0", credential("t0-ro").grant)
        await nc.publish(asked, json.dumps({"tenant": "t0", "library": "lib-a"}).encode())
        versions = await _violation(violations)
    finally:
        await nc.close()
    assert "permissions violation" in synced.lower()
    assert TOPOLOGY.synced("t0", "lib-a").lower() in synced.lower()
    assert "permissions violation" in versions.lower()
    assert asked.lower() in versions.lower()


async def _violation(errors: list[str]) -> str:
    for _ in range(50):
        if errors:
            return errors[-1]
        await asyncio.sleep(0.05)
    return ""


async def test_a_service_cannot_publish_or_subscribe_outside_its_stage(
    locked: Locked, violations: list[str]
) -> None:
    nc = await connect(locked, "ingestor", violations)
    try:
        await nc.publish(TOPOLOGY.in_lane("embeddings.ready", Lane.BULK, tenant="t1"), b"{}")
        await nc.flush()
        assert "permissions violation for publish" in (await _violation(violations)).lower()
        violations.clear()
        await nc.subscribe(TOPOLOGY.every("kb.search"))  # every tenant's searches
        await nc.flush()
        assert "permissions violation for subscription" in (await _violation(violations)).lower()
        violations.clear()
        # Nor can it manage streams: creating one is refused.
        with pytest.raises(Exception):  # noqa: B017, PT011 - a timeout or a permission error
            await nc.jetstream(timeout=2).add_stream(name="ROGUE", subjects=["rogue.>"])
    finally:
        await nc.close()


async def test_a_client_cannot_read_another_clients_replies(
    locked: Locked, violations: list[str]
) -> None:
    nc = await connect(locked, "t0-all", violations)
    try:
        for others in (f"{inbox('searcher')}.>", "_INBOX.>", f"{inbox('embedder')}.>"):
            violations.clear()
            await nc.subscribe(others)
            await nc.flush()
            assert (
                "permissions violation for subscription" in (await _violation(violations)).lower()
            )
    finally:
        await nc.close()
    # A client that does not use its own inbox prefix gets no replies at all.
    violations.clear()
    wrong = await connect(locked, "t0-all", violations, inbox_prefix="_INBOX")
    try:
        with pytest.raises(Exception):  # noqa: B017, PT011 - subscription to its inbox is refused
            await wrong.request(TOPOLOGY.asked("kb.stats", "t0"), b'{"tenant": "t0"}', timeout=2)
    finally:
        await wrong.close()


async def _list_collections(client: weaviate.WeaviateAsyncClient) -> None:
    await client.connect()
    await client.collections.list_all()


async def test_weaviate_refuses_a_wrong_key_and_no_key(locked: Locked) -> None:
    for key in ("not-the-key", None):
        auth = weaviate.classes.init.Auth.api_key(key) if key else None
        client = weaviate.use_async_with_local(
            port=locked.weaviate_http,
            grpc_port=locked.weaviate_grpc,
            auth_credentials=auth,
            skip_init_checks=True,
        )
        try:
            with pytest.raises(weaviate.exceptions.WeaviateBaseError):
                await _list_collections(client)
        finally:
            await client.close()
    good = weaviate.use_async_with_local(
        port=locked.weaviate_http,
        grpc_port=locked.weaviate_grpc,
        skip_init_checks=True,
        auth_credentials=weaviate.classes.init.Auth.api_key(WEAVIATE_KEY),
    )
    await good.connect()
    try:
        assert await good.alias.get(alias_name="Locked") is not None
    finally:
        await good.close()


async def test_reprocess_runs_with_the_admin_credential(locked: Locked, client: KbClient) -> None:
    """The admin job that cuts a library's documents again reads the index and the buckets
    and publishes on the tenant's subjects: the admin credential holds all it needs."""
    sheet = "Product: Kettle\nBoils water.\n\nProduct: Toaster\nBrowns bread."
    await client.publish_document(
        library="shelf", document_id="sheet", title="Sheet", text=sheet, wait=True, timeout_s=120
    )
    pattern = LibraryProfile(chunker=Chunker(kind=ChunkerKind.PATTERN, pattern="^Product:"))
    await client.profile("shelf", set_to=pattern)
    job = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kbus_searcher.jobs.reprocess",
        *("--tenant", client.tenant_for(), "--library", "shelf", "--timeout", "120"),
        env=locked.service_env("admin"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(job.communicate(), 180)
    assert job.returncode == 0, err.decode()[-3000:]
    assert "permissions violation" not in err.decode().lower()
    assert json.loads(out)["searchable"] == ["sheet"]
    [stats] = [s for s in (await client.stats()).libraries if s.library == "shelf"]
    assert (stats.documents, stats.chunks) == (1, 2)


def test_secrets_never_appear_in_logs(locked: Locked) -> None:
    logs = "".join(p.read_text(errors="replace") for p in locked.logs.glob("*.log"))
    assert logs, "the services wrote no logs"
    secrets = [*seeds(locked), WEAVIATE_KEY]
    assert len(secrets) > len(locked.creds)
    for secret in secrets:
        assert secret not in logs


def test_no_service_is_refused_what_it_does(locked: Locked) -> None:
    """Every subscription and publication of every service was granted (the server refuses
    the rest without failing the request that needed it: only the logs say)."""
    logs = sorted(locked.logs.glob("*.log"))
    assert {log.stem for log in logs} >= set(SERVICES)
    for log in logs:
        assert "permissions violation" not in log.read_text(errors="replace").lower(), log.name
