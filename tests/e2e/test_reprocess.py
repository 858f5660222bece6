"""A library's profile changed after its documents were indexed: they keep their chunks until
``python -m kbus_searcher.reprocess`` cuts them again with it, through the running pipeline."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

from kbus_client import KbClient
from kbus_contract import Chunker, ChunkerKind, LibraryProfile

from tests.e2e.conftest import Stack

SHEETS = {
    "kitchen": "Product: Kettle K1\nBoils 1.7 l of water for tea.\n\n"
    "Product: Toaster T2\nBrowns two slices of bread.\n\n"
    "Product: Blender B5\nCrushes ice for smoothies.",
    "garden": "Product: Hose H1\n25 m, kink-free, for watering beds.\n\n"
    "Product: Rake R2\nGathers autumn leaves from the lawn.",
}


async def _reprocess(stack: Stack, tenant: str, library: str) -> dict[str, Any]:
    done = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "kbus_searcher.reprocess",
            *("--tenant", tenant, "--library", library, "--timeout", "180"),
        ],
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcome: dict[str, Any] = json.loads(done.stdout)
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
