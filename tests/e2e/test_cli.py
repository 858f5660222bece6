"""The kbus command, run through its entry point as an operator would."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests import samples
from tests.e2e.conftest import Stack, kbus
from tests.webserver import Site, serve


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("docs")
    (root / "guide.md").write_text("# Guide\n\n## Backups\n\nNightly backups run at 02:00.\n")
    (root / "notes.txt").write_text("The cafeteria closes at three on Fridays.\n")
    (root / "page.html").write_text(
        "<html><head><title>Parking</title><script>var x=1;</script></head><body>"
        "<h1>Parking</h1><h2>Bicycles</h2><p>Bicycle racks are behind building C.</p>"
        "</body></html>"
    )
    (root / "badge.pdf").write_bytes(samples.pdf(["Lost badges are replaced at reception"]))
    (root / "rooms.xlsx").write_bytes(samples.sheet("Rooms", [["room", "seats"], ["Atlas", 9]]))
    (root / "sheet.xlsx").write_bytes(b"PK\x03\x04 not really")  # the ingestor refuses it
    (root / "photo.png").write_bytes(b"\x89PNG\r\n")  # the CLI refuses it
    return root


def test_ingest_search_status_delete(stack: Stack, docs: Path) -> None:
    result = kbus(stack, "ingest", str(docs), "--library", "ops", check=False)
    assert result.returncode == 1  # two files were refused, and said why
    assert "5 of 7 files indexed" in result.stdout
    assert "photo.png" in result.stdout
    assert "unsupported type .png" in result.stdout
    assert "sheet.xlsx" in result.stdout
    assert "not a zip archive" in result.stdout
    # Not on a terminal: progress in lines, the last one short of the total by what failed.
    last = [line for line in result.stderr.splitlines() if line.startswith("indexing")][-1]
    assert last.startswith("indexing (1 failed): 5/6 after "), result.stderr

    found = json.loads(
        kbus(stack, "search", "where can I leave my bike", "--library", "ops", "--json").stdout
    )
    top = found["results"][0]
    assert top["document_id"] == "page.html"
    assert top["heading_path"] == ["Parking", "Bicycles"]
    assert top["title"] == "Parking"
    pdf = json.loads(
        kbus(stack, "search", "badge replacement", "--library", "ops", "--json").stdout
    )
    assert pdf["results"][0]["document_id"] == "badge.pdf"
    assert pdf["results"][0]["page"] == 1
    seats = json.loads(kbus(stack, "search", "seats in Atlas", "--library", "ops", "--json").stdout)
    assert seats["results"][0]["document_id"] == "rooms.xlsx"
    table = kbus(stack, "search", "nightly backups", "--library", "ops").stdout
    assert "Guide" in table
    assert "Backups" in table

    status = kbus(stack, "status").stdout
    assert "ingestor" in status
    assert "embedder" in status
    assert "indexer" in status
    assert "ops" in status
    row = next(line for line in status.splitlines() if " ops " in f" {line} ")
    assert " 5 " in f" {row} "  # five documents

    deleted = kbus(stack, "delete", "--library", "ops", "--document", "notes.txt").stdout
    assert "deleted 1 chunks" in deleted
    after = json.loads(
        kbus(
            stack,
            "search",
            "cafeteria Friday",
            "--library",
            "ops",
            "--json",
            "--search-type",
            "keyword",
        ).stdout
    )
    assert "notes.txt" not in {r["document_id"] for r in after["results"]}


def test_dead_letters_are_listed_and_replayed(stack: Stack, docs: Path) -> None:
    import asyncio

    import nats

    async def publish_bad() -> None:
        nc = await nats.connect(stack.nats_url)
        # Well-formed (the gate stores it), but its records are not JSON: the ingestor's.
        bad = {
            "tenant": "cli-co",
            "library": "ops",
            "document_id": "fixable",
            "title": "Fixable",
            "text": "Replayed text about turnips.",
            "content_type": "application/json",
            "template": {"text": "{body}"},
        }
        await nc.jetstream().publish(
            stack.topology.added("cli-co", "ops"), json.dumps(bad).encode()
        )
        await nc.close()

    asyncio.run(publish_bad())
    listing = json.loads(kbus(stack, "dlq", "list", "--json").stdout)
    mine = [d for d in listing if d.get("document_id") == "fixable"]
    for _ in range(20):
        if mine:
            break
        listing = json.loads(kbus(stack, "dlq", "list", "--json").stdout)
        mine = [d for d in listing if d.get("document_id") == "fixable"]
    assert mine
    assert "JSON" in mine[0]["reason"]
    assert "fixable" in kbus(stack, "dlq", "list").stdout
    # Replaying the same bad message dead-letters it again (with the same reason).
    replayed = kbus(stack, "dlq", "replay", str(mine[0]["sequence"])).stdout
    assert "replayed 1" in replayed
    assert kbus(stack, "dlq", "replay", check=False).returncode == 2


def test_bad_connection_is_reported(stack: Stack) -> None:
    env = {**os.environ, "KBUS_NATS_URL": "nats://127.0.0.1:1"}
    result = subprocess.run(["kbus", "status"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "cannot reach NATS" in result.stderr


def test_a_sitemap_ingests_every_page_it_lists(stack: Stack) -> None:
    site = Site()
    site.pages["/a.html"] = ("text/html", b"<h1>Printers</h1><p>Printer P3 jams on A3 paper.</p>")
    site.pages["/b.html"] = ("text/html", b"<h1>Lockers</h1><p>Lockers open with your badge.</p>")
    with serve(site):
        site.pages["/sitemap.xml"] = (
            "application/xml",
            (
                '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<url><loc>{site.url}/a.html</loc></url><url><loc>{site.url}/b.html</loc></url>"
                "</urlset>"
            ).encode(),
        )
        result = kbus(stack, "ingest", "--sitemap", f"{site.url}/sitemap.xml", "--library", "web")
        assert "2 of 2 files indexed" in result.stdout
        found = json.loads(
            kbus(stack, "search", "which printer jams", "--library", "web", "--json").stdout
        )
    assert found["results"][0]["source_uri"] == f"{site.url}/a.html"
    assert {"/a.html", "/b.html"} <= set(site.asked)  # fetched by the ingestor


def test_a_library_s_chunker_is_set_tried_and_listed(stack: Stack, tmp_path: Path) -> None:
    sheet = tmp_path / "sheet.txt"
    sheet.write_text("Product: Kettle\nBoils water.\n\nProduct: Toaster\nBrowns bread.\n")
    for library in ("shop", "plain"):
        kbus(stack, "ingest", str(sheet), "--library", library)
    pattern = ("--chunker", "pattern", "--pattern", "^Product:")
    set_to = kbus(stack, "profile", "--library", "shop", *pattern, "--example", str(sheet)).stdout
    assert "chunker: pattern (at '^Product:')" in set_to
    assert "the example was cut into 2 chunks" in set_to
    assert "documents already indexed: 1. They keep their chunks" in set_to
    assert "kbus_searcher.jobs.reprocess --tenant cli-co --library shop" in set_to
    bad = ("--chunker", "pattern", "--pattern", "(?<=x)y")
    refused = kbus(stack, "profile", "--library", "shop", *bad, check=False)
    assert refused.returncode == 1
    assert "RE2" in refused.stderr
    rows = {
        line.split()[1]: line
        for line in kbus(stack, "libraries").stdout.splitlines()[3:]
        if len(line.split()) > 1
    }
    assert "pattern (at '^Product:')" in rows["shop"]
    assert "default" in rows["plain"]
    chained = ("--transformer", "question", "--reranker", "prompted", "--instruction", "Same item.")
    kept = kbus(
        stack, "profile", "--library", "shop", *chained, "--matching", "questions", "--count", "2"
    ).stdout
    assert "chunker: pattern (at '^Product:')" in kept  # links not named are kept
    assert "matching: 2 questions" in kept
    assert "transformer: question" in kept
    assert "reranker: prompted ('Same item.')" in kept
    stray = kbus(stack, "profile", "--library", "shop", "--transformer", "prompt", check=False)
    assert stray.returncode == 2
    assert "exactly when" in stray.stderr
