"""A client's view of kbus: plain nats-py, JSON on document.added, requests on kb.search."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from kbus_contract import MAX_QUERY_CHARS
from kbus_embedder.settings import EmbedderSettings
from kbus_runtime.analysis import analyze
from nats.aio.client import Client

from tests.busclient import Receipts, search
from tests.e2e.conftest import Stack
from tests.helpers import document, find_in_stream, publish_raw

HANDBOOK = [
    document(
        "acme",
        "handbook",
        "account-help",
        title="Account help",
        text=(
            "Forgotten passwords: click the reset link on the login screen and we will email you "
            "a new one within minutes."
        ),
    ),
    document(
        "acme",
        "handbook",
        "building",
        title="Building",
        text=(
            "Building access: badges are issued at reception. A lost badge must be reported the "
            "same day so that security can block it. Visitors sign in at the front desk."
        ),
    ),
    document(
        "acme",
        "handbook",
        "expenses",
        title="Expenses",
        text=(
            "Meals while travelling are reimbursed up to 60 euros per day when you keep the "
            "receipts. Submit claims within 30 days."
        ),
    ),
    document(
        "acme",
        "handbook",
        "errors",
        title="Upload errors",
        content_type="text/markdown",
        text=(
            "# Upload errors\n\n## E-7730-QX\nThe file type is not allowed.\n\n"
            "## E-7731-QX\nThe upload quota of your workspace is exhausted; delete old files or "
            "ask an administrator for more space.\n\n## E-7732-QX\nThe upload timed out.\n"
        ),
    ),
    document(
        "acme",
        "handbook",
        "plants",
        title="Office plants",
        text=("Water office plants only when the top of the soil is dry; turn the pots weekly."),
    ),
]
LEGAL = [
    document(
        "acme",
        "legal",
        "contract",
        title="Contract",
        text=("The supplier shall keep every password and secret of the customer confidential."),
    )
]
GLOBEX = [
    document(
        "globex",
        "handbook",
        "globex-only",
        title="Globex",
        text=("Forgotten passwords at Globex are reset by the service desk in person."),
    )
]
ALL = HANDBOOK + LEGAL + GLOBEX


@pytest.fixture(scope="module")
async def indexed(stack: Stack) -> Stack:
    import nats

    nc = await nats.connect(stack.nats_url)
    try:
        receipts = Receipts()
        await receipts.subscribe(nc, stack.topology)
        for doc in ALL:
            await publish_raw(nc, stack.topology, json.dumps(doc).encode())
        await receipts.wait_for(
            [(d["tenant"], d["library"], d["document_id"]) for d in ALL], timeout_s=240
        )
    finally:
        await nc.close()
    return stack


async def _search(nc: Client, stack: Stack, **request: Any) -> dict[str, Any]:
    reply = await search(
        nc, stack.topology, {"tenant": "acme", "libraries": ["handbook"], **request}
    )
    assert reply["kind"] == "search_results", reply
    return reply


async def test_a_paraphrase_with_no_shared_keyword_finds_its_answer_first(
    indexed: Stack, nc: Client
) -> None:
    query = "what should I do if I cannot remember my credentials"
    # No keyword of the query is in any document, as the keyword search sees them.
    terms = set(analyze(query).split())
    for doc in HANDBOOK:
        assert not terms & set(analyze(doc["title"] + " " + doc["text"]).split())
    reply = await _search(nc, indexed, query=query, rerank=True)
    top = reply["results"][0]
    assert top["document_id"] == "account-help"
    assert len(reply["results"]) == 5
    assert reply["score_kind"] == "rerank"
    assert reply["reranker"]
    # The server reranks by default, locally with MaxSim over the encoder's token states.
    default = await _search(nc, indexed, query=query)
    assert default["results"][0]["document_id"] == "account-help"
    assert default["score_kind"] == "rerank"
    assert default["reranker"].startswith("maxsim/all-MiniLM-L6-v2")
    shallow = await _search(nc, indexed, query=query, rerank_depth=2)
    reranked = [h["scores"]["rerank"] is not None for h in shallow["results"]]
    assert reranked == [True, True, False, False, False]
    assert sum(h["scores"]["rerank"] is not None for h in default["results"]) == 5
    first_stage = await _search(nc, indexed, query=query, rerank=False)
    assert first_stage["results"][0]["document_id"] == "account-help"
    assert (first_stage["score_kind"], first_stage["reranker"]) == ("first_stage", "")
    hit = first_stage["results"][0]["scores"]
    assert hit["final"] == hit["first_stage"]
    assert hit["document"] is not None  # the document's own cosine, beside the chunk's
    assert first_stage["timings"]["rerank_ms"] == 0
    assert top["scores"]["vector"] is not None
    assert top["scores"]["fused"] is not None
    assert reply["timings"]["total_ms"] > 0


async def test_an_exact_rare_token_finds_its_chunk_first(indexed: Stack, nc: Client) -> None:
    for rerank in (True, False):
        reply = await _search(nc, indexed, query="E-7731-QX", rerank=rerank)
        top = reply["results"][0]
        assert top["document_id"] == "errors"
        assert "quota" in top["text"]
        assert top["heading_path"] == ["Upload errors", "E-7731-QX"]
    keyword_only = await _search(
        nc, indexed, query="E-7731-QX", search_type="keyword", rerank=False
    )
    assert "quota" in keyword_only["results"][0]["text"]
    assert keyword_only["score_kind"] == "bm25"


async def test_a_library_scope_never_returns_another_librarys_chunks(
    indexed: Stack, nc: Client
) -> None:
    legal = await _search(nc, indexed, query="password secret", libraries=["legal"], k=50)
    assert {r["library"] for r in legal["results"]} == {"legal"}
    handbook = await _search(nc, indexed, query="supplier confidential", k=50)
    assert "contract" not in {r["document_id"] for r in handbook["results"]}
    both = await _search(nc, indexed, query="password", libraries=["legal", "handbook"], k=50)
    assert {r["library"] for r in both["results"]} == {"legal", "handbook"}


async def test_a_tenant_never_sees_another_tenants_chunks(indexed: Stack, nc: Client) -> None:
    for search_type in ("hybrid", "vector", "keyword"):
        acme = await _search(
            nc,
            indexed,
            query="forgotten passwords Globex service desk",
            search_type=search_type,
            k=50,
        )
        assert "globex-only" not in {r["document_id"] for r in acme["results"]}
    globex = await _search(nc, indexed, tenant="globex", query="forgotten passwords", k=50)
    assert {r["document_id"] for r in globex["results"]} == {"globex-only"}


async def test_no_library_means_nothing_is_searched(indexed: Stack, nc: Client) -> None:
    reply = await _search(nc, indexed, query="passwords", libraries=[])
    assert reply["searched"] is False
    assert reply["results"] == []
    assert reply["no_match"] is False
    assert reply["timings"]["embed_ms"] == 0


async def test_min_score_gives_no_match(indexed: Stack, nc: Client) -> None:
    reply = await _search(
        nc, indexed, query="passwords", min_score=0.9999, rerank=False, search_type="vector"
    )
    assert reply["no_match"] is True
    assert reply["results"] == []
    assert reply["candidates"] > 0


async def test_an_off_topic_question_gets_no_match_with_its_evidence(
    indexed: Stack, nc: Client
) -> None:
    off = await _search(nc, indexed, query="How long should I rest a steak after grilling it?")
    assert off["no_match"] is True
    assert off["no_match_reason"] == "weak_evidence"
    assert off["results"] == []
    assert off["evidence"] < off["min_evidence"]
    assert off["best_similarity"] is not None
    on = await _search(nc, indexed, query="I forgot my password")
    assert on["no_match"] is False
    assert on["no_match_reason"] is None
    assert on["evidence"] >= on["min_evidence"]
    # The caller may set its own cosine floor instead, or turn no_match off with -1.
    strict = await _search(nc, indexed, query="I forgot my password", min_similarity=0.99)
    assert strict["no_match_reason"] == "below_min_similarity"
    anything = await _search(
        nc, indexed, query="How long should I rest a steak after grilling it?", min_evidence=-1
    )
    assert anything["results"]


async def test_a_few_keywords_are_answered_though_they_embed_far_from_any_chunk(
    indexed: Stack, nc: Client
) -> None:
    reply = await _search(nc, indexed, query="badges reception", rerank=False)
    assert reply["no_match"] is False
    assert reply["results"][0]["document_id"] == "building"
    assert reply["keyword_coverage"] == 1.0 or reply["best_similarity"] >= reply["min_evidence"]


async def test_a_long_query_is_searched_and_one_past_the_limit_is_refused_naming_it(
    indexed: Stack, nc: Client
) -> None:
    paragraph = "Lost badges must be reported to security at reception the same day. "
    reply = await _search(nc, indexed, query=paragraph * 120)  # about 8,000 characters
    assert reply["results"][0]["document_id"] == "building"
    refused = await search(
        nc,
        indexed.topology,
        {"tenant": "acme", "libraries": ["handbook"], "query": "x" * (MAX_QUERY_CHARS + 1)},
    )
    assert refused["kind"] == "error"
    assert refused["error"]["code"] == "invalid_message"
    assert str(MAX_QUERY_CHARS) in refused["error"]["message"]


async def test_keyword_search_matches_other_forms_of_a_word(indexed: Stack, nc: Client) -> None:
    exact = await _search(nc, indexed, query="passwords", search_type="keyword")
    inflected = await _search(nc, indexed, query="password", search_type="keyword")
    assert exact["results"]
    assert [r["chunk_id"] for r in exact["results"]] == [
        r["chunk_id"] for r in inflected["results"]
    ]


async def test_k_limits_the_results(indexed: Stack, nc: Client) -> None:
    reply = await _search(nc, indexed, query="office", k=2)
    assert len(reply["results"]) == 2


async def test_a_malformed_document_lands_on_the_dead_letter_subject_with_a_reason(
    indexed: Stack, nc: Client
) -> None:
    bad = document("acme", "handbook", "bad*id", text="text")
    await publish_raw(nc, indexed.topology, json.dumps(bad).encode())
    letter = await find_in_stream(
        nc, indexed.topology.dead_letters, {"tenant": "acme", "document_id": "bad*id"}
    )
    assert letter["stage"] == "ingestor"
    assert "document_id" in letter["reason"]
    assert letter["code"] == "invalid_message"
    # The pipeline keeps working after it.
    ok = await _search(nc, indexed, query="E-7731-QX")
    assert ok["results"]


async def test_a_document_that_cannot_be_indexed_gets_a_failed_receipt(
    indexed: Stack, nc: Client
) -> None:
    empty = document("acme", "handbook", "blank-page", text="   \n ")
    await publish_raw(nc, indexed.topology, json.dumps(empty).encode())
    failed = await find_in_stream(
        nc, indexed.topology.document_failed, {"tenant": "acme", "document_id": "blank-page"}
    )
    assert failed["library"] == "handbook"
    assert failed["stage"] == "ingestor"
    assert failed["reason"]


async def test_every_service_serves_health_and_metrics(indexed: Stack) -> None:
    async with httpx.AsyncClient() as http:
        for name, port in indexed.http_ports.items():
            health = await http.get(f"http://127.0.0.1:{port}/health")
            assert health.status_code == 204, name
            metrics = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
            assert "faststream_received_messages_total" in metrics, name
            assert "kbus_" in metrics, name
        embedder = await http.get(f"http://127.0.0.1:{indexed.http_ports['embedder']}/metrics")
        assert f'kbus_embedder_chunks_total{{model="{EmbedderSettings().model}"}}' in embedder.text
        searcher = await http.get(f"http://127.0.0.1:{indexed.http_ports['searcher']}/metrics")
        assert 'kbus_search_stage_seconds_count{stage="rerank"}' in searcher.text
