"""Syncs keep a library in step with its source: what it no longer lists is deleted, what is
unchanged is neither cut nor embedded again, and the newest publish or deletion wins."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from kbus_client import KbClient
from kbus_contract import LibraryReconciled, LibrarySync, SyncEntry
from nats.aio.msg import Msg

from tests.e2e.conftest import Stack, embedded_chunks, kbus
from tests.helpers import metric
from tests.webserver import Site, serve

TENANT = "syncco"


async def _client(stack: Stack) -> KbClient:
    return await KbClient.connect(
        stack.nats_url, prefix=stack.topology.prefix, tenant=TENANT, acts_for=None
    )


def _doc(number: int, edition: str = "") -> dict[str, Any]:
    return {
        "document_id": f"note-{number:04d}",
        "title": f"Note {number}",
        "text": f"Note {number}{edition}: the stock room {number % 37} holds crate {number}.",
    }


async def test_a_thousand_documents_resynced_delete_100_reembed_100_and_leave_800(
    stack: Stack,
) -> None:
    async with await _client(stack) as kb:
        first = await kb.sync_library("notes", [_doc(i) for i in range(1_000)], source="wiki")
        assert first.published == 1_000
        assert (first.receipt.added, first.receipt.failed, first.receipt.deleted) == (1_000, 0, 0)

        before = await embedded_chunks(stack)
        # 100 removed (0-99), 100 changed (100-199), 800 unchanged (200-999).
        again = [_doc(i, " (revised)") for i in range(100, 200)]
        again += [_doc(i) for i in range(200, 1_000)]
        second = await kb.sync_library("notes", again, source="wiki")
        after = await embedded_chunks(stack)

        receipt = second.receipt
        counts = (receipt.added, receipt.changed, receipt.unchanged, receipt.deleted)
        assert counts == (0, 100, 800, 100), receipt
        assert receipt.failed == 0
        assert second.published == 100  # the unchanged 800 were not even sent
        assert after - before == 100  # one chunk each: only the changed ones were embedded
        held = await kb.versions("notes", source="wiki")
        assert set(held) == {f"note-{i:04d}" for i in range(100, 1_000)}
        gone = await kb.search("crate 42", libraries=["notes"], search_type="keyword", k=50)
        assert "note-0042" not in {h.document_id for h in gone.results}


async def test_a_sync_of_one_source_leaves_the_library_s_other_sources_alone(
    stack: Stack,
) -> None:
    async with await _client(stack) as kb:
        await kb.sync_library("mixed", [_doc(1), _doc(2)], source="wiki")
        await kb.sync_library("mixed", [_doc(3)], source="tickets")
        emptied = await kb.sync_library("mixed", [], source="wiki")
        assert emptied.receipt.deleted == 2
        assert set(await kb.versions("mixed")) == {"note-0003"}


async def test_publishes_and_deletions_after_a_sync_win_over_it(stack: Stack) -> None:
    """The sync is held up behind another that waits, so everything published after it is
    indexed before it is applied: only its sequence says it is older."""
    async with await _client(stack) as kb:
        for number in (1, 2, 3):
            await kb.publish_document(library="race", wait=True, timeout_s=120, **_doc(number))
        topology = kb.topology
        js = kb.nc.jetstream()
        blocker = LibrarySync(
            tenant=TENANT,
            library="blocked",
            documents=(SyncEntry(document_id="never", version="v1"),),
            settle_s=12.0,
        )
        await js.publish(topology.synced(TENANT, "blocked"), blocker.model_dump_json().encode())
        listed = {"note-0001": (await kb.versions("race"))["note-0001"]}
        sync = LibrarySync(
            tenant=TENANT,
            library="race",
            documents=tuple(SyncEntry(document_id=i, version=v) for i, v in listed.items()),
            settle_s=5.0,
        )
        receipts: asyncio.Queue[LibraryReconciled] = asyncio.Queue()

        async def on_receipt(msg: Msg) -> None:
            receipts.put_nowait(LibraryReconciled.model_validate_json(msg.data))

        sub = await kb.nc.subscribe(topology.reconciled(TENANT, "race"), cb=on_receipt)
        await js.publish(topology.synced(TENANT, "race"), sync.model_dump_json().encode())
        # After the sync: note 2 changes (unlisted, but newer), note 4 is new (unlisted, but
        # newer), note 1 is deleted (listed, but the deletion is newer).
        await kb.publish_document(library="race", wait=True, timeout_s=120, **_doc(2, " v2"))
        await kb.publish_document(library="race", wait=True, timeout_s=120, **_doc(4))
        await kb.delete_document(library="race", document_id="note-0001", wait=True)
        receipt = await asyncio.wait_for(receipts.get(), 120)
        await sub.unsubscribe()
        held = await kb.versions("race")
        assert set(held) == {"note-0002", "note-0004"}, (held, receipt)
        assert receipt.deleted == 1  # note 3: published before the sync, not listed
        assert receipt.superseded == 1  # note 1: deleted after the sync


async def _skipped_unlisted(stack: Stack) -> float:
    pattern = r'kbus_indexer_skipped_total\{reason="unlisted"\} ([0-9.e+]+)'
    return await metric(stack.http_ports["searcher"], pattern)


async def test_a_publish_still_in_the_pipeline_that_a_later_sync_does_not_list_stays_out(
    stack: Stack,
) -> None:
    async with await _client(stack) as kb:
        await kb.sync_library("late", [_doc(1)], source="wiki")
        skipped = await _skipped_unlisted(stack)
        long_text = " ".join(f"Paragraph {n} of the draft that was withdrawn." for n in range(400))
        await kb.publish_document(
            library="late", document_id="draft", text=long_text, source="wiki"
        )
        # At once: the source no longer holds the draft (it is still being cut and embedded).
        result = await kb.sync_library("late", [_doc(1)], source="wiki", settle_s=5)
        assert result.receipt.unchanged == 1
        for _ in range(120):
            held = await kb.versions("late", source="wiki")
            if "draft" in held or await _skipped_unlisted(stack) > skipped:
                break
            await asyncio.sleep(0.5)
        assert set(await kb.versions("late", source="wiki")) == {"note-0001"}
        assert await _skipped_unlisted(stack) > skipped


def test_kbus_sync_of_a_folder_removes_a_removed_file(stack: Stack, tmp_path: Path) -> None:
    folder = tmp_path / "handbook"
    folder.mkdir()
    for name, text in {
        "leave.md": "# Leave\n\nAnnual leave is 28 days.\n",
        "travel.txt": "Book trains through the travel desk.\n",
        "kit.txt": "Laptops are replaced every four years.\n",
    }.items():
        (folder / name).write_text(text)
    sync = ("sync", str(folder), "--library", "handbook", "--source", "drive")
    first = kbus(stack, *sync).stdout
    assert "3 documents published" in first
    (folder / "kit.txt").unlink()
    second = kbus(stack, *sync).stdout
    assert "0 documents published" in second
    row = _counts(second)
    assert row == {"added": 0, "changed": 0, "unchanged": 2, "deleted": 1, "failed": 0}, second
    found = kbus(stack, "search", "laptops replaced", "--library", "handbook").stdout
    assert "kit.txt" not in found


def test_kbus_sync_of_a_sitemap_removes_a_page_it_no_longer_lists(stack: Stack) -> None:
    site = Site()
    site.pages["/a.html"] = ("text/html", b"<h1>Printers</h1><p>Printer P3 jams on A3.</p>")
    site.pages["/b.html"] = ("text/html", b"<h1>Lockers</h1><p>Lockers open by badge.</p>")

    def listing(*paths: str) -> tuple[str, bytes]:
        urls = "".join(
            f"<url><loc>{site.url}{p}</loc><lastmod>2026-11-0{i + 1}</lastmod></url>"
            for i, p in enumerate(paths)
        )
        return "application/xml", f"<urlset>{urls}</urlset>".encode()

    with serve(site):
        sync = ("sync", f"{site.url}/sitemap.xml", "--library", "site")
        site.pages["/sitemap.xml"] = listing("/a.html", "/b.html")
        assert "2 documents published" in kbus(stack, *sync).stdout
        site.pages["/sitemap.xml"] = listing("/a.html")
        second = kbus(stack, *sync).stdout
    assert _counts(second) == {"added": 0, "changed": 0, "unchanged": 1, "deleted": 1, "failed": 0}


def _counts(output: str) -> dict[str, int]:
    """The counts row of ``kbus sync``'s table."""
    names = ["added", "changed", "unchanged", "deleted", "failed"]
    for line in output.splitlines():
        numbers = re.findall(r"\d+", line)
        if len(numbers) == 5 and not any(n in line for n in names):
            return dict(zip(names, map(int, numbers), strict=True))
    raise AssertionError(f"no counts in:\n{output}")
