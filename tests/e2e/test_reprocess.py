"""A library's profile changed after its documents were indexed: they keep their chunks until
``python -m kbus_searcher.jobs.reprocess`` cuts them again with it, through the running pipeline."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from typing import Any

from kbus_client import KbClient
from kbus_contract import Chunker, ChunkerKind, LibraryProfile

from tests.e2e.conftest import Stack
from tests.helpers import metric

SHEETS = {
    "kitchen": "Product: Kettle K1\nBoils 1.7 l of water for tea.\n\n"
    "Product: Toaster T2\nBrowns two slices of bread.\n\n"
    "Product: Blender B5\nCrushes ice for smoothies.",
    "garden": "Product: Hose H1\n25 m, kink-free, for watering beds.\n\n"
    "Product: Rake R2\nGathers autumn leaves from the lawn.",
}


async def _reprocess(stack: Stack, tenant: str, library: str) -> dict[str, Any]:
    job = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kbus_searcher.jobs.reprocess",
        *("--tenant", tenant, "--library", library, "--timeout", "180"),
        env=stack.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(job.communicate(), 240)
    assert job.returncode == 0, err.decode()[-3000:]
    outcome: dict[str, Any] = json.loads(out)
    return outcome


async def _chunks(kb: KbClient, library: str) -> tuple[int, int]:
    [stats] = [s for s in (await kb.stats()).libraries if s.library == library]
    return stats.documents, stats.chunks


async def test_documents_keep_their_chunks_until_reprocessed_with_the_new_profile(
    stack: Stack,
) -> None:
    kb = await KbClient.connect(stack.nats_url, prefix=stack.topology.prefix, tenant="recut")
    async with kb:
        for sheet, text in SHEETS.items():
            await kb.publish_document(
                library="sheets", document_id=sheet, title=sheet, text=text, wait=True
            )
        await kb.publish_document(
            library="other",
            document_id="kitchen",
            title="kitchen",
            text=SHEETS["kitchen"],
            wait=True,
        )
        assert await _chunks(kb, "sheets") == (2, 2)  # cut by size: each sheet is one chunk

        profile = LibraryProfile(chunker=Chunker(kind=ChunkerKind.PATTERN, pattern="^Product:"))
        revision = (await kb.profile("sheets", set_to=profile)).revision
        assert await _chunks(kb, "sheets") == (2, 2)  # the profile decides for new publishes

        outcome = await _reprocess(stack, "recut", "sheets")
        assert sorted(outcome["republished"]) == sorted(outcome["searchable"]) == sorted(SHEETS)
        assert (outcome["skipped"], outcome["pending"]) == ({}, [])
        assert await _chunks(kb, "sheets") == (2, 5)  # one chunk per product, old ones gone
        reply = await kb.search("a kettle for boiling water", libraries=["sheets"])
        first = reply.results[0]
        assert first.text.startswith("Product: Kettle K1")
        assert "Toaster" not in first.text
        assert first.version.endswith(f"+profile{revision}")
        # The other library, with the default profile, was not touched.
        assert await _chunks(kb, "other") == (1, 1)

        again = await _reprocess(stack, "recut", "sheets")
        assert again["republished"] == []
        assert sorted(again["current"]) == sorted(SHEETS)


async def _chunks_held(nc: Any, stack: Stack) -> int:
    info = await nc.jetstream().stream_info(stack.topology.chunks_stream.name)
    return int(info.state.messages)


async def _chunks_waiting(nc: Any, stack: Stack, count: int, timeout_s: float = 60.0) -> None:
    """Wait until the chunks stream holds ``count`` messages (nothing takes them meanwhile)."""
    deadline = time.monotonic() + timeout_s
    while await _chunks_held(nc, stack) < count:
        assert time.monotonic() < deadline, "the ingestor did not pass the publishes on"
        await asyncio.sleep(0.2)


async def _withdrawals(stack: Stack, stage: str, reason: str) -> float:
    """How many messages ``stage`` has skipped for ``reason`` so far (kbus_runtime.withdrawals)."""
    pattern = rf'kbus_messages_withdrawn_total\{{reason="{reason}",stage="{stage}"\}} ([0-9.e+]+)'
    return await metric(stack.http_ports[stage], pattern)


async def _withdrawn(
    stack: Stack, stage: str, reason: str, before: float, timeout_s: float = 60.0
) -> None:
    """Wait until ``stage`` has skipped one more message for ``reason`` than ``before``."""
    deadline = time.monotonic() + timeout_s
    while await _withdrawals(stack, stage, reason) <= before:
        assert time.monotonic() < deadline, f"the {stage} skipped nothing ({reason})"
        await asyncio.sleep(0.2)


async def test_a_publisher_s_newer_publish_wins_over_the_old_text_cut_again(stack: Stack) -> None:
    """The re-cut of the stored version and the publisher's next version meet in the pipeline
    (the embedder held still meanwhile): the newer publish is what stays, and the re-cut, which
    the newer publish made useless before the ingestor took it, is not even cut."""
    kb = await KbClient.connect(stack.nats_url, prefix=stack.topology.prefix, tenant="race")
    embedder = stack.processes["embedder"]
    async with kb:
        await kb.publish_document(
            library="sheets", document_id="garden", title="garden", text=SHEETS["garden"], wait=True
        )
        profile = LibraryProfile(chunker=Chunker(kind=ChunkerKind.PATTERN, pattern="^Product:"))
        await kb.profile("sheets", set_to=profile)
        newer = SHEETS["garden"].replace("Hose H1", "Hose H9")
        held = await _chunks_held(kb.nc, stack)
        skipped = await _withdrawals(stack, "ingestor", "superseded")
        embedder.proc.send_signal(signal.SIGSTOP)
        try:
            published = await kb.publish_document(
                library="sheets", document_id="garden", title="garden", text=newer
            )
            job = asyncio.create_task(_reprocess(stack, "race", "sheets"))
            await _chunks_waiting(kb.nc, stack, held + 1)  # the newer publish's
            await _withdrawn(stack, "ingestor", "superseded", skipped)  # the re-cut's, skipped
        finally:
            embedder.proc.send_signal(signal.SIGCONT)
        outcome = await job
        assert outcome["overtaken"] == ["garden"]
        reply = await kb.search("garden hose", libraries=["sheets"], k=10)
    assert {hit.version for hit in reply.results} == {published.version}
    assert any("Hose H9" in hit.text for hit in reply.results)
    assert not any("Hose H1" in hit.text for hit in reply.results)
