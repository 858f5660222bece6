"""A team's first week, journey by journey, typed as a person types it (issue 58)."""

from __future__ import annotations

import inspect
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from kbus_client import KbClient, KbError, SyncKbClient
from kbus_client.tool import KbTool
from kbus_runtime.settings import BusSettings
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from tests.e2e.conftest import Stack, kbus
from tests.helpers import cli_env
from tests.webserver import Site, serve


def _synced(stack: Stack, folder: Path, *options: str) -> dict[str, object]:
    result = kbus(stack, "sync", str(folder), "--library", "team", "--json", *options)
    body: dict[str, object] = json.loads(result.stdout)
    body["stderr"] = result.stderr
    return body


def test_a_person_s_folder_syncs_around_what_kbus_cannot_read(stack: Stack, tmp_path: Path) -> None:
    """An image, an empty file, names with spaces and other characters, a ``.git`` folder and
    a log excluded by a glob: synced, edited and synced again."""
    folder = tmp_path / "team"
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "config").write_text("[core] the repository's own file\n")
    (folder / "plans").mkdir()
    (folder / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (folder / "empty.md").write_text("  \n")
    (folder / "Meeting notes.md").write_text("# Meeting\n\nThe VPN rollout moves to March.\n")
    (folder / "plans" / "Q1 (draft) — ünïcode.txt").write_text("Hire two site engineers.\n")
    (folder / "debug.log").write_text("not a document\n")

    first = _synced(stack, folder, "--exclude", "*.log")
    assert sorted(first["added_documents"]) == [  # type: ignore[call-overload]
        "Meeting~20notes.md",
        "plans/Q1~20~28draft~29~20~E2~80~94~20~C3~BCn~C3~AFcode.txt",
    ], first
    said = str(first["stderr"])
    assert "skipped " + str(folder / "image.png") + ": unsupported type .png" in said, said
    assert "skipped " + str(folder / "empty.md") + ": the file is empty" in said, said
    assert ".git" not in said, said
    assert "debug.log" not in said, said

    (folder / "Meeting notes.md").write_text("# Meeting\n\nThe VPN rollout moves to April.\n")
    (folder / "plans" / "Q1 (draft) — ünïcode.txt").unlink()
    second = _synced(stack, folder, "--exclude", "*.log")
    assert second["changed_documents"] == ["Meeting~20notes.md"], second
    assert second["deleted"] == 1, second
    assert len(second["deleted_documents"]) == 1, second  # type: ignore[arg-type]
    found = kbus(stack, "search", "when does the VPN rollout happen", "--library", "team")
    assert "April" in found.stdout, found.stdout

    # Indexed once and now unreadable: the sync stops, naming the file, and deletes nothing.
    (folder / "Meeting notes.md").write_bytes(b"\xff\xfe not text")
    stopped = kbus(stack, "sync", str(folder), "--library", "team", check=False)
    assert stopped.returncode == 1
    assert "nothing synced: cannot read " + str(folder / "Meeting notes.md") in stopped.stderr
    assert "April" in kbus(stack, "search", "VPN rollout", "--library", "team").stdout


#: A model's ordinary mistakes, each answered in one sentence (issue 58, finding 4).
BAD_ARGUMENTS: list[object] = [
    {"query": "vpn", "k": "five"},
    {"query": "vpn", "expand": "bogus"},
    {"query": ""},
    {"query": "   "},
    {"k": 3},
    {"query": "vpn", "budget_tokens": 300, "cursor": "not-a-cursor"},
    {"query": "vpn", "colour": "blue"},
    {"query": ["vpn"]},
    "[1, 2]",
    "{not json",
]
JUNK: list[object] = ["", "vpn", "5", 5, -3, 10**9, 2.5, None, [], {}, "bogus", "document", True]


def _one_sentence(text: object) -> None:
    assert isinstance(text, str), text
    assert text, text
    assert "\n" not in text, text
    assert "Traceback" not in text, text
    assert text.endswith("."), text


async def _tool(stack: Stack) -> tuple[KbClient, KbTool]:
    client = await KbClient.connect(stack.nats_url, prefix=stack.topology.prefix, tenant="agentco")
    await client.publish_document(library="it", document_id="vpn", title="VPN", text=VPN, wait=True)
    return client, client.as_tool(libraries=["it"])


VPN = "Connect to the office VPN with acme-vpn up; the gateway is vpn.acme.example."


async def test_the_agent_tool_answers_every_bad_call_in_a_sentence(stack: Stack) -> None:
    client, tool = await _tool(stack)
    async with client:
        for arguments in BAD_ARGUMENTS:
            _one_sentence(await tool.call_json(arguments))  # type: ignore[arg-type]
        # The JSON string OpenAI returns as function.arguments, with k as a string.
        found = await tool.call_json('{"query": "how do I connect to the VPN", "k": "2"}')
        assert "acme-vpn up" in found, found
        # Any mix of names and values a model might send: an answer, never an exception.
        rng = random.Random(58)
        names = ["query", "k", "budget_tokens", "expand", "cursor", "action", "text", "other"]
        for _ in range(60):
            arguments = {n: rng.choice(JUNK) for n in rng.sample(names, rng.randint(0, 4))}
            answer = await tool.call_json(arguments)
            assert isinstance(answer, str), answer
            assert answer, arguments
            assert "Traceback" not in answer, answer


async def test_mcp_answers_every_bad_call_in_a_sentence(stack: Stack) -> None:
    client, _ = await _tool(stack)
    await client.close()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbus_cli", "mcp", "--library", "it"],
        env=cli_env(stack.nats_url, stack.topology.prefix, "agentco"),
    )
    async with Client(params) as mcp:
        for arguments in BAD_ARGUMENTS:
            if not isinstance(arguments, dict) or "colour" in arguments:
                continue  # an MCP host sends an object, and the SDK drops unknown names
            result = await mcp.call_tool("search_knowledge_base", arguments)
            _one_sentence("".join(c.text for c in result.content if isinstance(c, TextContent)))


def test_the_blocking_client_offers_every_method_of_the_async_one(stack: Stack) -> None:
    asynchronous = {
        name
        for name, member in inspect.getmembers(KbClient)
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    }
    with SyncKbClient.connect(
        stack.nats_url, prefix=stack.topology.prefix, tenant="blockco", acts_for=None
    ) as kb:
        assert asynchronous <= set(dir(kb)), asynchronous - set(dir(kb))
        kb.publish_document(library="desk", document_id="kettle", title="", text=VPN, wait=True)
        printer = "To print, badge in at the printer on floor 3."
        synced = kb.sync_library("desk", [{"document_id": "printer", "text": printer}])
        assert synced.deleted == ("kettle",), synced
        assert [d.document_id for d in kb.documents("desk")] == ["printer"]
        assert [lib.library for lib in kb.stats().libraries] == ["desk"]
        tool = kb.as_tool(libraries=["desk"])
        _one_sentence(tool.call_json('{"query": ""}'))
        assert "badge in" in tool.call_json('{"query": "how do I print at the printer"}')
        removed = kb.delete_document(library="desk", wait=True)
        assert removed is not None


def test_the_cli_says_what_went_wrong_in_one_line_and_asks_before_deleting_much(
    stack: Stack, tmp_path: Path
) -> None:
    down = kbus(
        stack, "search", "vpn", "--library", "x", "--nats-url", "nats://127.0.0.1:9", check=False
    )
    assert down.returncode == 2
    assert down.stderr.strip().count("\n") == 0, down.stderr
    assert "cannot reach NATS at nats://127.0.0.1:9" in down.stderr
    assert "Connect call failed" in down.stderr  # said at the refusal, not after nats-py's tries
    assert "make up" in down.stderr

    (tmp_path / "kettle.md").write_text("# Kettle\n\nThe kettle is descaled every Friday.\n")
    ingested = json.loads(
        kbus(stack, "ingest", str(tmp_path), "--library", "desk", "--json").stdout
    )
    assert ingested == {"indexed": 1, "files": 1, "failed": []}
    listed = json.loads(kbus(stack, "documents", "--library", "desk", "--json").stdout)
    assert [d["document_id"] for d in listed["documents"]] == ["kettle.md"]
    assert (listed["total"], listed["after"]) == (1, None)
    libraries = json.loads(kbus(stack, "libraries", "--json").stdout)
    assert {lib["library"] for lib in libraries} >= {"desk"}

    wrong = kbus(stack, "search", "kettle", "--library", "dsek")
    assert "has no documents in 'dsek'" in wrong.stderr, wrong.stderr
    assert "desk" in wrong.stderr

    asked = kbus(stack, "delete", "--library", "desk", check=False)
    assert asked.returncode == 2
    assert "Pass --yes to confirm" in asked.stderr
    still = json.loads(kbus(stack, "documents", "--library", "desk", "--json").stdout)
    assert [d["document_id"] for d in still["documents"]] == ["kettle.md"]
    nothing = kbus(stack, "delete", "--library", "nope", "--yes", check=False)
    assert nothing.returncode == 1  # a delete of nothing is not a success
    assert "has no library 'nope'" in nothing.stderr

    replay = kbus(stack, "dlq", "replay", "999999", check=False)
    assert replay.returncode == 1
    assert "no dead letter 999999" in replay.stderr


def test_a_listing_says_how_many_it_did_not_show_and_pages_on(stack: Stack, tmp_path: Path) -> None:
    """Paged at a random size, a library's listing shows every document once, in id order,
    each page with the total; the table says what it left out and how to ask for it."""
    names = sorted(f"note-{n:02}.md" for n in range(random.randint(4, 9)))
    for name in names:
        (tmp_path / name).write_text(f"# {name}\n\nThe shelf holds {name}.\n")
    kbus(stack, "ingest", str(tmp_path), "--library", "pages", "--json")
    limit = random.randint(1, 3)
    seen: list[str] = []
    after: list[str] = []
    while True:
        asked = ["documents", "--library", "pages", "--limit", str(limit), "--json", *after]
        page = json.loads(kbus(stack, *asked).stdout)
        assert page["total"] == len(names), (limit, page)
        seen += [d["document_id"] for d in page["documents"]]
        if page["after"] is None:
            break
        after = ["--after", page["after"]]
    assert seen == names, limit
    shown = kbus(stack, "documents", "--library", "pages", "--limit", "2")
    assert f"2 shown of {len(names)}; the next page: --after {names[1]}" in shown.stderr


def test_a_sitemap_sync_stops_waiting_for_a_page_that_was_refused(stack: Stack) -> None:
    """A page the ingestor cannot fetch is dead-lettered in a second: the sync names it at
    once, instead of waiting out its settle time (here 600 s, longer than the command may
    take) and calling it "not searchable in time"."""
    site = Site()
    site.pages["/ok.html"] = ("text/html", b"<h1>Parking</h1><p>Level -2 is for visitors.</p>")
    with serve(site):  # the site's address is known once it serves
        urls = "".join(
            f"<url><loc>{site.url}{p}</loc><lastmod>2026-12-01</lastmod></url>"
            for p in ("/ok.html", "/gone.html")
        )
        site.pages["/sitemap.xml"] = ("application/xml", f"<urlset>{urls}</urlset>".encode())
        result = kbus(
            stack,
            "sync",
            f"{site.url}/sitemap.xml",
            "--library",
            "site",
            "--settle",
            "600",
            "--json",
            check=False,
        )
    body = json.loads(result.stdout)
    assert (body["added"], body["failed"]) == (1, 1), json.dumps(body)
    [named] = body["dead_lettered"]
    assert named.startswith(site.url.split("://", 1)[1] + "/gone.html: "), named
    assert body["unsettled"] == [], body
    assert result.returncode == 1


async def test_a_publisher_sees_its_own_restricted_documents_listed(stack: Stack) -> None:
    """A library of three documents, two of them for some readers only: its publisher (a
    writing credential, here the open bus) lists and counts all three; a search as no one
    reads only the one everyone may read."""
    async with await KbClient.connect(
        stack.nats_url, prefix=stack.topology.prefix, tenant="cli-co", acts_for=None
    ) as kb:
        for name, access in (("open", None), ("hr-only", ["group:hr"]), ("ann", ["user:ann"])):
            await kb.publish_document(
                library="mixed",
                document_id=name,
                title="",
                text=f"{name}: {VPN}",
                access=access,
                wait=True,
            )
        assert len(await kb.documents("mixed")) == 1
    listed = json.loads(kbus(stack, "documents", "--library", "mixed", "--json").stdout)
    assert [d["document_id"] for d in listed["documents"]] == ["ann", "hr-only", "open"]
    libraries = json.loads(kbus(stack, "libraries", "--json").stdout)
    assert [lib["documents"] for lib in libraries if lib["library"] == "mixed"] == [3]


def test_status_says_which_services_answer(stack: Stack) -> None:
    status = json.loads(kbus(stack, "status", "--json").stdout)
    answering = status["services_answering"]
    assert set(answering) == {
        "gateway",
        "ingestor",
        "generator",
        "embedder",
        "searcher",
        "reranker",
    }
    assert all(n >= 1 for n in answering.values()), answering


async def test_a_document_over_the_limit_is_refused_at_its_first_part(stack: Stack) -> None:
    """A byte more than kbus takes: refused with the limit named, when the first part of its
    upload arrives, not dead-lettered after the whole of it was sent."""
    limit = BusSettings.model_fields["max_document_bytes"].default
    text = ("The boiler room key hangs by the door. " * (limit // 39 + 1))[: limit + 1]
    async with await KbClient.connect(
        stack.nats_url, prefix=stack.topology.prefix, tenant="bigco"
    ) as kb:
        with pytest.raises(KbError) as refused:
            await kb.publish_document(library="big", document_id="huge", text=text)
    assert refused.value.code == "too_large", refused.value
    assert f"at most {limit} bytes" in str(refused.value)


def test_the_readme_s_quickstart_runs_as_written(stack: Stack) -> None:
    env = cli_env(stack.nats_url, stack.topology.prefix, "acme")
    ran = subprocess.run(
        [sys.executable, str(Path(__file__).parents[2] / "examples/code/quickstart.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert "acme-vpn up" in ran.stdout
    assert "search_handbook" in ran.stdout


async def test_a_large_document_tells_its_indexing_progress(stack: Stack) -> None:
    """A document of a few hundred chunks is indexed in parts; as each part is stored the
    indexer says how many chunks of how many are in, never going back, short of the total
    until the receipt says the whole is searchable."""
    rng = random.Random(3)
    words = ["boiler", "key", "badge", "printer", "floor", "kettle", "desk", "visitor"]
    text = "\n\n".join(
        " ".join(rng.choices(words, k=rng.randint(60, 120))) + "." for _ in range(400)
    )
    async with (
        await KbClient.connect(
            stack.nats_url, prefix=stack.topology.prefix, tenant="bigco", acts_for=None
        ) as kb,
        kb.progress_of("manuals") as told,
    ):
        result = await kb.publish_document(
            library="manuals", document_id="handbook", text=text, wait=True, timeout_s=600
        )
        heard = []
        while not told.empty():
            heard.append(told.get_nowait())
    assert result.receipt is not None
    total = result.receipt.chunk_count
    assert total > 2 * 64, total  # in more than two parts
    assert heard, "no progress was told"
    assert {p.total for p in heard} == {total}
    counts = [p.indexed for p in heard]
    assert 0 < counts[0] < total
    assert all(n < total for n in counts)


def test_a_profile_is_reset_to_kbus_s_defaults(stack: Stack) -> None:
    kbus(stack, "profile", "--library", "notes", "--chunker", "sections", "--reranker", "none")
    changed = json.loads(kbus(stack, "profile", "--library", "notes", "--json").stdout)
    assert changed["profile"]["chunker"]["kind"] == "sections"
    reset = json.loads(kbus(stack, "profile", "--library", "notes", "--reset", "--json").stdout)
    assert reset["revision"] > changed["revision"]
    default = json.loads(kbus(stack, "profile", "--library", "fresh-library", "--json").stdout)
    assert reset["profile"] == default["profile"]
