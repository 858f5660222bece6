"""Bad input, each kind through the bus: a clear reason, in bounded time, nothing else lost."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from kbus_client import DocumentRejectedError, KbClient
from nats.aio.client import Client
from nats.errors import MaxPayloadError

from tests.busclient import Receipts, search
from tests.e2e.conftest import Stack
from tests.helpers import document, find_in_stream, publish_raw


async def _letter(nc: Client, stack: Stack, match: dict[str, object]) -> dict[str, object]:
    started = time.monotonic()
    letter = await find_in_stream(nc, stack.topology.dead_letters, match, timeout_s=30)
    assert time.monotonic() - started < 30
    assert letter["stage"] == "ingestor"
    assert letter["reason"]
    return letter


async def test_malformed_documents_are_dead_lettered_with_a_reason(
    stack: Stack, nc: Client
) -> None:
    marker = uuid.uuid4().hex
    broken = b'{"tenant": "acme", "library": "bad", ' + marker.encode()
    await publish_raw(nc, stack.topology, broken)
    await _letter(nc, stack, {"original": broken.decode()})

    not_utf8 = b"\xff\xfe\xfa" + marker.encode()
    await publish_raw(nc, stack.topology, not_utf8)
    await _letter(nc, stack, {"original": not_utf8.decode("utf-8", errors="replace")})

    missing = {"tenant": "acme", "library": "bad", "document_id": f"no-text-{marker}"}
    await publish_raw(nc, stack.topology, json.dumps(missing).encode())
    letter = await _letter(nc, stack, {"document_id": missing["document_id"]})
    assert "text" in str(letter["reason"])

    empty = document("acme", "bad", f"empty-{marker}", text="")
    await publish_raw(nc, stack.topology, json.dumps(empty).encode())
    letter = await _letter(nc, stack, {"document_id": empty["document_id"]})
    assert "empty" in str(letter["reason"])


@pytest.mark.parametrize(("tenant", "document_id"), [("acme", "*"), ("acme", ">"), ("a.b", "x")])
async def test_subject_characters_in_ids_are_refused(
    stack: Stack, nc: Client, tenant: str, document_id: str
) -> None:
    library = f"ids{uuid.uuid4().hex[:8]}"
    doc = document(tenant, library, document_id, text="text")
    # On acme's subject: the body's own tenant is refused for its characters.
    await publish_raw(nc, stack.topology, json.dumps(doc).encode(), "acme", library)
    letter = await _letter(nc, stack, {"library": library})
    field = "tenant" if tenant != "acme" else "document_id"
    assert field in str(letter["reason"])


async def test_a_dot_in_a_document_id_is_fine_ids_never_become_subjects(
    stack: Stack, nc: Client
) -> None:
    receipts = Receipts()
    await receipts.subscribe(nc, stack.topology)
    doc = document("acme", "dotted", "a.b", text="File names such as vpn.md have dots.")
    await publish_raw(nc, stack.topology, json.dumps(doc).encode())
    await receipts.wait_for([("acme", "dotted", "a.b")], timeout_s=120)


async def test_ten_thousand_metadata_keys_are_refused(stack: Stack, nc: Client) -> None:
    nested: dict[str, object] = {f"k{i}": {"v": i} for i in range(5_000)}
    doc = document("acme", "bad", f"meta-{uuid.uuid4().hex}", text="text", metadata=nested)
    await publish_raw(nc, stack.topology, json.dumps(doc).encode())
    letter = await _letter(nc, stack, {"document_id": doc["document_id"]})
    assert "metadata has 10000 keys" in str(letter["reason"])


async def test_a_raw_publish_over_the_payload_limit_is_refused_by_the_bus(
    stack: Stack, nc: Client
) -> None:
    doc = document("acme", "bad", "huge", text="word " * 1_000_000)
    with pytest.raises(MaxPayloadError):
        await publish_raw(nc, stack.topology, json.dumps(doc).encode())


def _large_text(megabytes: int, last_words: str) -> str:
    passage = (
        "Valves are inspected every spring. The inspector records the pressure at each joint. "
        "A reading above the limit closes the line until a second inspector confirms it.\n\n"
    )
    return passage * (megabytes * 1_000_000 // len(passage)) + last_words


async def test_a_2_mb_document_travels_by_claim_check_and_is_indexed_whole(
    stack: Stack, nc: Client
) -> None:
    kb = KbClient(nc, prefix=stack.topology.prefix, tenant="acme")
    text = _large_text(2, "The archive closes with the word zyzzogeton.")
    started = time.monotonic()
    result = await kb.publish_document(
        library="large", document_id="manual", title="Valve manual", text=text, wait=True
    )
    assert result.receipt is not None
    assert result.receipt.chunk_count > 4_000
    assert time.monotonic() - started < 300
    # The last words made it through: the whole text arrived.
    found = await kb.search("zyzzogeton", libraries=["large"], search_type="keyword")
    assert found.results
    assert "zyzzogeton" in found.results[0].text
    # The claim-checked text is removed once the ingestor is done with it.
    t = stack.topology
    stored = await nc.jetstream().stream_info(
        t.bodies_stream.name, subjects_filter=t.bodies_of("acme")
    )
    assert not stored.state.subjects  # the 2 MB of parts are purged


async def test_a_50_mb_document_is_refused_before_it_is_sent_with_a_reason(
    stack: Stack, nc: Client
) -> None:
    kb = KbClient(nc, prefix=stack.topology.prefix, tenant="acme")
    started = time.monotonic()
    with pytest.raises(DocumentRejectedError) as rejected:
        await kb.publish_document(
            library="large",
            document_id="giant",
            title="Giant",
            text=_large_text(50, "end"),
            wait=True,
            timeout_s=60,
        )
    assert rejected.value.code == "too_large"
    assert "49999867 bytes" in rejected.value.message  # refused before its parts were sent
    assert time.monotonic() - started < 60


async def test_oversized_search_requests_get_an_error_reply(stack: Stack, nc: Client) -> None:
    base = {"tenant": "acme", "libraries": ["handbook"]}
    started = time.monotonic()
    long_query = await search(nc, stack.topology, {**base, "query": "q" * 1_000_000})
    assert long_query["kind"] == "error"
    assert "query" in long_query["error"]["message"]
    huge_k = await search(nc, stack.topology, {**base, "query": "vpn", "k": 10_000})
    assert huge_k["kind"] == "error"
    assert "k" in huge_k["error"]["message"]
    assert time.monotonic() - started < 10


async def test_after_all_of_it_a_good_document_is_still_indexed(stack: Stack, nc: Client) -> None:
    receipts = Receipts()
    await receipts.subscribe(nc, stack.topology)
    good = document("acme", "after-bad", "fine", text="The cafeteria opens at eight.")
    await publish_raw(nc, stack.topology, json.dumps(good).encode())
    await receipts.wait_for([("acme", "after-bad", "fine")], timeout_s=120)
