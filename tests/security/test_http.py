"""kbus over HTTP (``python -m kbus_console``) on the locked installation: a bearer token is a
credential, so an HTTP request reaches exactly what the credential reaches over NATS, no more,
and its answers and errors are the same as over NATS."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from pathlib import Path
from typing import Any

import httpx
import pytest
from fpdf import FPDF
from kbus_client import CredentialFile, KbError
from kbus_client.http import HttpKbClient
from kbus_dev.natsauth import Credential

from tests.security.conftest import CREDENTIALS, Locked, client_for

TENANTS = ("t1", "t2")
LIBRARIES = ("lib-a", "lib-b")
NAMES = ("t1-all", "t1-a", "t1-ro-b", "t2-all", "t2-ro")
WORDS = ("lantern", "harbour", "copper", "meadow", "signal", "quartz")


def _text(tenant: str, library: str, n: int) -> str:
    rng = random.Random(f"{tenant}{library}{n}")
    return " ".join(rng.choices(WORDS, k=12)) + f" httpmark{tenant}{library.replace('-', '')}"


@pytest.fixture(scope="module")
async def published(locked: Locked) -> Locked:
    """Three documents in each library of t1 and t2."""
    for tenant in TENANTS:
        kb = await client_for(locked, f"{tenant}-all")
        async with kb:
            for library in LIBRARIES:
                for n in range(3):
                    await kb.publish_document(
                        library=library,
                        document_id=f"http-{n}",
                        title=f"{tenant} {library} {n}",
                        text=_text(tenant, library, n),
                        wait=True,
                        timeout_s=120,
                    )
    return locked


def _token(locked: Locked, name: str) -> str:
    return CredentialFile.read(locked.auth / f"credential-{name}.json").token()


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _hits(reply: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(h["library"], h["document_id"], h["text"]) for h in reply["results"]]


async def test_http_and_nats_answer_random_searches_alike(published: Locked, console: str) -> None:
    """The same randomized requests over both: the same hits in the same order, the same
    no-match verdicts, and the same error codes (another tenant's, an ungranted library)."""
    rng = random.Random(7140)
    clients = {name: await client_for(published, name) for name in NAMES}
    try:
        async with httpx.AsyncClient(base_url=console, timeout=60) as http:
            for _ in range(24):
                name = rng.choice(NAMES)
                body: dict[str, Any] = {
                    "query": " ".join(rng.sample(WORDS, rng.randint(1, 3))),
                    "libraries": rng.sample(LIBRARIES, rng.randint(1, 2)),
                    "k": rng.randint(1, 5),
                    "search_type": rng.choice(["keyword", "hybrid", "vector"]),
                    "rerank": rng.random() < 0.3,
                }
                if rng.random() < 0.2:
                    body["tenant"] = rng.choice(TENANTS)
                over_http = await http.post(
                    "/v1/search", json=body, headers=_auth(_token(published, name))
                )
                asked = {k: v for k, v in body.items() if k not in ("query", "libraries")}
                try:
                    reply = await clients[name].search(
                        body["query"], libraries=body["libraries"], **asked
                    )
                except KbError as exc:
                    refused = str(exc.code)
                else:
                    refused = ""
                if refused:
                    assert over_http.status_code >= 400, (name, body, over_http.text)
                    problem = over_http.json()
                    assert problem["code"] == refused, (name, body, problem)
                    assert over_http.headers["content-type"] == "application/problem+json"
                    continue
                assert over_http.status_code == 200, (name, body, over_http.text)
                got = over_http.json()
                assert _hits(got) == [(h.library, h.document_id, h.text) for h in reply.results]
                assert got["no_match"] == reply.no_match
    finally:
        for client in clients.values():
            await client.close()


async def test_a_token_reaches_only_what_its_credential_does(
    published: Locked, console: str
) -> None:
    writer, reader, one_library = (_token(published, n) for n in ("t1-all", "t1-ro", "t1-a"))
    search = {"query": "lantern", "libraries": ["lib-a"], "search_type": "keyword"}
    async with httpx.AsyncClient(base_url=console, timeout=60) as http:

        async def code(method: str, path: str, token: str | None, **kw: Any) -> tuple[int, str]:
            headers = {**kw.pop("headers", {}), **(_auth(token) if token else {})}
            answer = await http.request(method, path, headers=headers, **kw)
            if answer.status_code < 400:
                return answer.status_code, ""
            assert answer.headers["content-type"] == "application/problem+json", answer.text
            problem = answer.json()
            assert "\n" not in problem["detail"], problem  # one sentence, no traceback
            return answer.status_code, problem["code"]

        assert (await code("POST", "/v1/search", None, json=search))[0] == 401
        assert (await code("POST", "/v1/search", "kbus1.bm9wZQ", json=search))[0] == 401
        assert (await code("POST", "/v1/search", "Zm9v", json=search))[0] == 401
        # The tenant the token holds is its credential's: naming another changes nothing.
        held = json.loads(CredentialFile.read(published.auth / "credential-t1-all.json").text())
        forged = CredentialFile.model_validate({**held, "tenant": "t2"}).token()
        status, why = await code("POST", "/v1/search", forged, json=search)
        assert status == 403, why
        assert await code("POST", "/v1/search", writer, json={**search, "tenant": "t2"}) == (
            403,
            "permission_denied",
        )
        assert (await code("GET", "/v1/libraries/lib-b/documents", one_library))[0] == 403
        assert (
            await code("POST", "/v1/search", one_library, json={**search, "libraries": ["lib-b"]})
        )[0] == 403
        document = {"title": "x", "text": "read-only tokens publish nothing"}
        # Over NATS as over HTTP, a refused publish or deletion is said as one, at once.
        ro = await client_for(published, "t1-ro")
        async with ro:
            with pytest.raises(KbError) as publishing:
                await ro.publish_document(
                    library="lib-a", document_id="ro", title="x", text=document["text"]
                )
            with pytest.raises(KbError) as deleting:
                await ro.delete_document(library="lib-a", document_id="http-0")
        assert publishing.value.code == deleting.value.code == "permission_denied"
        assert (await code("PUT", "/v1/libraries/lib-a/documents/ro", reader, json=document))[
            0
        ] == 403
        assert (await code("DELETE", "/v1/libraries/lib-a/documents/http-0", reader))[0] == 403
        # Bodies the console refuses before asking anything.
        too_big = {"title": "x", "text": "y" * (9 * 1024**2)}
        assert (await code("PUT", "/v1/libraries/lib-a/documents/big", writer, json=too_big))[
            0
        ] == 413
        assert await code(
            "POST",
            "/v1/search",
            writer,
            content=b"{not json",
            headers={"content-type": "application/json"},
        ) == (400, "invalid")
        assert (await code("POST", "/v1/search", writer, content=b"query=x"))[0] == 415
        assert (await code("POST", "/v1/search", writer, json=["a", "list"]))[0] == 400
        assert (await code("GET", "/v1/no-such-route", writer))[0] == 404
        assert (await code("PATCH", "/v1/search", writer))[0] == 405
        # No browser page of another origin may call it; nothing it answers may be framed.
        answer = await http.post(
            "/v1/search", json=search, headers={**_auth(writer), "Origin": "https://evil.test"}
        )
        assert answer.status_code == 200
        assert "access-control-allow-origin" not in answer.headers
        assert answer.headers["content-security-policy"].startswith("default-src 'none'")
        assert answer.headers["x-content-type-options"] == "nosniff"


async def test_a_document_published_listed_and_deleted_over_http(
    published: Locked, console: str
) -> None:
    token = _token(published, "t2-all")
    async with httpx.AsyncClient(base_url=console, timeout=180, headers=_auth(token)) as http:
        document = {
            "title": "Quay",
            "text": "The quay lantern is lit at dusk by the harbourmaster.",
        }
        put = await http.put("/v1/libraries/lib-b/documents/quay?wait=true", json=document)
        assert put.status_code == 201, put.text
        assert put.json()["receipt"]["chunk_count"] >= 1
        found = await http.post(
            "/v1/search",
            json={"query": "harbourmaster", "libraries": ["lib-b"], "search_type": "keyword"},
        )
        assert [h["document_id"] for h in found.json()["results"]] == ["quay"]
        page = await http.get("/v1/libraries/lib-b/documents", params={"limit": 2})
        assert page.status_code == 200
        assert page.json()["total"] >= 4
        assert len(page.json()["documents"]) == 2
        libraries = (await http.get("/v1/libraries")).json()["libraries"]
        assert {lib["library"] for lib in libraries} >= set(LIBRARIES)
        gone = await http.delete("/v1/libraries/lib-b/documents/quay?wait=true")
        assert gone.status_code == 200, gone.text
        assert gone.json()["chunks_deleted"] >= 1
        schema = (await http.get("/openapi.json")).json()
        body = schema["components"]["schemas"]["SearchRequestBody"]["properties"]
        assert "query" in body
        assert "budget_ms" not in body  # the console's wait sets it
        required = schema["components"]["schemas"]["SearchRequestBody"]["required"]
        assert "tenant" not in required  # the credential's unless named


async def test_a_token_ends_when_its_credential_is_narrowed(locked: Locked, console: str) -> None:
    """A writer's token publishes; its credential made read-only, the old token is refused
    (401) at once, and the new credential's token may read but not write."""
    writer = Credential("t3-http", "t3", libraries=("lib-a",), write=True)
    await locked.provision([*CREDENTIALS, writer])
    old = _token(locked, writer.name)
    document = {"title": "x", "text": "narrowed tokens stop at once"}
    async with httpx.AsyncClient(base_url=console, timeout=120) as http:
        try:
            put = await http.put(
                "/v1/libraries/lib-a/documents/narrow", json=document, headers=_auth(old)
            )
            assert put.status_code == 202, put.text
            await locked.provision([*CREDENTIALS, Credential(writer.name, "t3", ("lib-a",), False)])
            search = {"query": "narrowed", "libraries": ["lib-a"], "search_type": "keyword"}
            for _ in range(100):  # the server closes the revoked user's connection
                refused = await http.post("/v1/search", json=search, headers=_auth(old))
                if refused.status_code == 401:
                    break
                await asyncio.sleep(0.1)
            assert refused.status_code == 401, refused.text
            new = _token(locked, writer.name)
            assert (
                await http.post("/v1/search", json=search, headers=_auth(new))
            ).status_code == 200
            again = await http.put(
                "/v1/libraries/lib-a/documents/narrow", json=document, headers=_auth(new)
            )
            assert again.status_code == 403, again.text
        finally:
            with contextlib.suppress(Exception):
                await locked.provision(CREDENTIALS)


async def test_one_tenant_s_requests_beyond_its_share_are_refused_not_queued(
    published: Locked, console: str
) -> None:
    """The console answers at most four requests of one tenant at once (its setting here):
    the fifth is refused 429 at once, and another tenant is answered meanwhile."""
    flood, other = _token(published, "t1-all"), _token(published, "t2-all")
    slow = {"query": " ".join(WORDS), "libraries": list(LIBRARIES), "rerank": True, "k": 5}
    async with httpx.AsyncClient(base_url=console, timeout=120) as http:
        answers = await _together(
            [http.post("/v1/search", json=slow, headers=_auth(flood)) for _ in range(12)]
        )
        statuses = sorted(a.status_code for a in answers)
        assert 429 in statuses, statuses
        assert all(s in (200, 429) for s in statuses), statuses
        quick = {"query": "quartz", "libraries": ["lib-a"], "search_type": "keyword"}
        assert (await http.post("/v1/search", json=quick, headers=_auth(other))).status_code == 200


async def _together(calls: list[Any]) -> list[httpx.Response]:
    return list(await asyncio.gather(*calls))


async def test_the_client_s_surface_works_over_http_as_over_nats(
    published: Locked, console: str
) -> None:
    """``HttpKbClient``: the same search replies, tool text and backlog as ``KbClient``'s, the
    same error codes, and an agent's memory kept, listed and forgotten over HTTP."""
    rng = random.Random(7141)
    token = _token(published, "t2-all")
    over_nats = await client_for(published, "t2-all")
    async with over_nats, HttpKbClient(console, token) as over_http:
        for _ in range(6):
            query = " ".join(rng.sample(WORDS, 2))
            k = rng.randint(1, 4)
            nats_reply = await over_nats.search(query, libraries=list(LIBRARIES), k=k)
            http_reply = await over_http.search(query, libraries=list(LIBRARIES), k=k)
            assert [(h.document_id, h.text) for h in http_reply.results] == [
                (h.document_id, h.text) for h in nats_reply.results
            ]
        asked = {"query": "copper meadow"}
        tools = [kb.as_tool(libraries=["lib-a"], k=3) for kb in (over_nats, over_http)]
        assert await tools[1].call_json(asked) == await tools[0].call_json(asked)
        with pytest.raises(KbError) as refused:
            await over_http.search("x", libraries=["lib-a"], tenant="t1")
        assert refused.value.code == "permission_denied"
        # Its own work waiting at each stage (none now: what it published is indexed).
        assert await over_http.backlog() == await over_nats.backlog()
        pdf = FPDF()
        pdf.add_page()
        pdf.set_font("Helvetica", size=12)
        pdf.multi_cell(0, 8, "The loading bay doors close automatically at ten at night.")
        filed = await over_http.publish_document(
            library="lib-a",
            document_id="bay.pdf",
            data=bytes(pdf.output()),
            content_type="application/pdf",
            wait=True,
        )
        assert filed.receipt is not None
        assert filed.receipt.chunk_count >= 1
        memory = over_http.memory("notes", conversation="http")
        kept = await memory.remember("The night shift restarts the compressor at two.")
        assert [m.document_id for m in await memory.list()] == [kept]
        assert await memory.forget(kept) >= 1
        assert await memory.list() == ()


async def test_files_profiles_dead_letters_and_progress_over_http(
    published: Locked, console: str, tmp_path: Path
) -> None:
    token = _token(published, "t1-all")
    async with httpx.AsyncClient(base_url=console, timeout=180, headers=_auth(token)) as http:
        # A file's bytes, its format from its media type.
        pdf = FPDF()
        pdf.add_page()
        pdf.set_font("Helvetica", size=12)
        pdf.multi_cell(0, 8, "The gantry crane is inspected every spring by the riggers.")
        put = await http.put(
            "/v1/libraries/lib-b/files/crane.pdf?wait=true",
            content=bytes(pdf.output()),
            headers={"content-type": "application/pdf"},
        )
        assert put.status_code == 201, put.text
        found = await http.post(
            "/v1/search",
            json={"query": "gantry riggers", "libraries": ["lib-b"], "search_type": "keyword"},
        )
        assert found.json()["results"][0]["document_id"] == "crane.pdf"
        refused = await http.put(
            "/v1/libraries/lib-b/files/x.png",
            content=b"\x89PNG",
            headers={"content-type": "image/png"},
        )
        assert refused.json()["code"] == "unsupported_content_type", refused.text

        # A profile, set with a sample cut by it, then back to kbus's defaults.
        sample = "# Pumps\n\n## Priming\nOpen the vent.\n\n## Draining\nClose the valve.\n"
        changes = [
            {"chunker": {"kind": "recursive"}},
            {"chunker": {"kind": "pattern", "pattern": "^## "}},
        ]
        cut = []
        for change in changes:
            set_to = await http.put(
                "/v1/libraries/lib-b/profile", json={"profile": change, "example": sample}
            )
            assert set_to.status_code == 200, set_to.text
            cut.append(set_to.json()["example_chunks"])
        assert cut[1] > cut[0], cut
        assert (await http.get("/v1/libraries/lib-b/profile")).json()["profile"]["chunker"][
            "kind"
        ] == "pattern"
        await http.put("/v1/libraries/lib-b/profile", json={"profile": {}})

        # A dead letter listed, replayed, and gone from the list.
        kb = await client_for(published, "t1-all")
        async with kb:
            body: dict[str, Any] = {"tenant": "t1", "library": "lib-a", "title": "x", "text": "y"}
            body |= {"document_id": "http-letter", "content_type": "application/json"}
            body |= {"template": {"text": "{a}"}}
            await kb.nc.jetstream().publish("document.added.t1.lib-a", json.dumps(body).encode())
        sequence = None
        for _ in range(60):
            letters = (await http.get("/v1/dead-letters")).json()["letters"]
            mine = [s for s in letters if s["letter"]["document_id"] == "http-letter"]
            if mine:
                sequence = mine[0]["sequence"]
                break
            await asyncio.sleep(0.5)
        assert sequence is not None, "no dead letter listed"
        replayed = await http.post(f"/v1/dead-letters/{sequence}/replay")
        assert replayed.status_code == 202, replayed.text
        letters = (await http.get("/v1/dead-letters")).json()["letters"]
        assert sequence not in [s["sequence"] for s in letters]

        # A large document's progress, as server-sent events.
        events: list[str] = []

        async def follow() -> None:
            async with http.stream("GET", "/v1/libraries/lib-a/progress?seconds=120") as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data: "):
                        events.append(line)
                        return

        following = asyncio.create_task(follow())
        await asyncio.sleep(1.0)
        large = " ".join(f"Sentence {n} about the {WORDS[n % len(WORDS)]}." for n in range(9000))
        await http.put(
            "/v1/libraries/lib-a/documents/large?wait=true", json={"title": "L", "text": large}
        )
        await asyncio.wait_for(following, 120)
        told = json.loads(events[0].removeprefix("data: "))
        assert told["document_id"] == "large"
        assert 0 < told["indexed"] <= told["total"]


async def test_a_library_synced_over_http_holds_exactly_each_list(
    published: Locked, console: str
) -> None:
    """Random lists synced in turn: after each, the library holds exactly the list's documents
    at their versions, and the answer names what was added, changed and deleted; a list with
    bytes or a field of the wrong shape is the caller's 400, nothing synced."""
    rng = random.Random(4711)
    token = _token(published, "t1-all")
    held: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=console, timeout=300, headers=_auth(token)) as http:
        for _ in range(3):
            ids = sorted(rng.sample([f"note-{i}" for i in range(6)], rng.randint(1, 5)))
            texts = {i: f"{i}: " + " ".join(rng.choices(WORDS, k=6)) for i in ids}
            docs = [{"document_id": i, "title": i, "text": texts[i]} for i in ids]
            synced = await http.post("/v1/libraries/synced/sync", json={"documents": docs})
            assert synced.status_code == 200, synced.text
            said = synced.json()
            assert sorted(said["added"]) == sorted(set(ids) - set(held))
            assert sorted(said["deleted"]) == sorted(set(held) - set(ids))
            assert sorted(said["changed"]) == sorted(
                i for i in ids if i in held and held[i] != texts[i]
            )
            held = texts
            page = await http.get("/v1/libraries/synced/documents", params={"limit": 50})
            assert sorted(d["document_id"] for d in page.json()["documents"]) == ids
        for wrong in (
            {"document_id": "x", "text": "x", "data": "AAAA"},
            {"document_id": "x", "text": "x", "matching": 5},
            {"document_id": "x", "text": "x", "library": "other"},
            {"text": "no id"},
        ):
            refused = await http.post("/v1/libraries/synced/sync", json={"documents": [wrong]})
            assert refused.status_code == 400, (wrong, refused.text)
            assert refused.headers["content-type"].startswith("application/problem+json")
        page = await http.get("/v1/libraries/synced/documents", params={"limit": 50})
        assert sorted(d["document_id"] for d in page.json()["documents"]) == sorted(held)
