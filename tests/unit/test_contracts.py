"""Contracts: validation, the vector wire form, and readable reasons."""

from __future__ import annotations

import json

import numpy as np
import pytest
from kbus_contract import (
    DocumentAdded,
    EmbeddedChunk,
    EmbedRequest,
    ErrorInfo,
    ErrorReply,
    QueryStates,
    RerankCandidate,
    RerankReply,
    RerankRequest,
    SearchRequest,
)
from kbus_contract.errors import PermanentError, TransientError
from kbus_contract.identifiers import chunk_id
from kbus_contract.wire import decode, parse_reply
from kbus_runtime.dead_letters import identity_of
from kbus_runtime.redelivery import backoff_s
from pydantic import ValidationError

GOOD = {
    "tenant": "acme",
    "library": "docs",
    "document_id": "guides/setup.md",
    "title": "Setup",
    "text": "Hello.",
    "content_type": "text/markdown",
}


def test_a_valid_document_parses() -> None:
    doc = decode(json.dumps(GOOD).encode(), DocumentAdded)
    assert doc.document_id == "guides/setup.md"


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"tenant": "a.b"}, "tenant"),
        ({"tenant": "*"}, "tenant"),
        ({"library": ">"}, "library"),
        ({"document_id": "has space"}, "document_id"),
        ({"document_id": "a*"}, "document_id"),
        ({"content_type": "image/png"}, "content_type"),
        ({"content_type": "application/pdf"}, "travels by claim check"),
        ({"content_type": "text/csv"}, "need a template"),
        ({"url": "file:///etc/passwd", "text": ""}, "url"),
        ({"url": "https://example.com/"}, "text must be empty"),
        ({"text": " \n "}, "text"),
        ({"unexpected": 1}, "unexpected"),
    ],
)
def test_invalid_documents_name_the_field(change: dict[str, object], where: str) -> None:
    with pytest.raises(PermanentError) as info:
        decode(json.dumps({**GOOD, **change}).encode(), DocumentAdded)
    assert where in info.value.reason
    assert info.value.code == "invalid_message"


def test_missing_fields_and_bad_bytes_are_permanent_errors() -> None:
    with pytest.raises(PermanentError, match="title"):
        decode(json.dumps({k: v for k, v in GOOD.items() if k != "title"}).encode(), DocumentAdded)
    with pytest.raises(PermanentError, match="JSON"):
        decode(b"{not json", DocumentAdded)
    with pytest.raises(PermanentError):
        decode(b"\xff\xfe\x00garbage", DocumentAdded)


def test_a_document_carries_its_text_or_a_claim_check_never_both_or_neither() -> None:
    ref = {"name": "b" * 64, "size": 3, "sha256": "a" * 64}
    claimed = DocumentAdded.model_validate({**GOOD, "text": "", "body": ref})
    assert claimed.body is not None
    assert claimed.body.size == 3
    with pytest.raises(ValidationError, match="text must be empty"):
        DocumentAdded.model_validate({**GOOD, "body": ref})
    with pytest.raises(ValidationError, match="text is empty"):
        DocumentAdded.model_validate({**GOOD, "text": ""})
    with pytest.raises(ValidationError, match="sha256"):
        DocumentAdded.model_validate({**GOOD, "text": "", "body": {**ref, "sha256": "x"}})
    with pytest.raises(ValidationError, match="name"):  # names only its library's share
        DocumentAdded.model_validate({**GOOD, "text": "", "body": {**ref, "name": "../x"}})


def test_search_request_bounds() -> None:
    with pytest.raises(ValidationError):
        SearchRequest(tenant="t", libraries=("a",), query="q", k=101)
    with pytest.raises(ValidationError):
        SearchRequest(tenant="t", libraries=("a",), query="   ")
    assert SearchRequest(tenant="t", libraries=(), query="q").libraries == ()


def test_vectors_travel_as_base64_float32_and_round_trip() -> None:
    vector = tuple(float(x) for x in np.linspace(-1, 1, 384, dtype=np.float32))
    chunk = EmbeddedChunk(
        chunk_id="c", position=0, text="t", char_start=0, char_end=1, vector=vector
    )
    wire = chunk.model_dump_json()
    assert isinstance(json.loads(wire)["vector"], str)
    assert EmbeddedChunk.model_validate_json(wire).vector == vector
    # Plain lists are accepted too, for clients that do not know the encoding.
    as_list = {**json.loads(wire), "vector": [0.5, 0.25]}
    assert EmbeddedChunk.model_validate(as_list).vector == (0.5, 0.25)


def test_a_query_s_token_states_travel_as_base64_and_come_back_as_the_same_bytes() -> None:
    packed = bytes(range(256)) * 3
    request = RerankRequest(
        query="q",
        candidates=(RerankCandidate(id="a", text="t"),),
        query_states=QueryStates(model="m", states=packed),
    )
    wire = request.model_dump_json()

    assert isinstance(json.loads(wire)["query_states"]["states"], str)
    back = RerankRequest.model_validate_json(wire).query_states
    assert back is not None
    assert back.states == packed
    with pytest.raises(ValidationError):
        QueryStates(model="m", states="not base64!")


def test_token_states_are_asked_for_one_text_only() -> None:
    assert EmbedRequest(texts=("q",), token_states=True).token_states
    with pytest.raises(ValidationError, match="one text"):
        EmbedRequest(texts=("q", "r"), token_states=True)


def test_chunk_ids_are_uuid5_of_identity() -> None:
    a = chunk_id("t", "l", "d", "v1", 0)
    assert a == chunk_id("t", "l", "d", "v1", 0)
    assert (
        len(
            {
                a,
                chunk_id("t", "l", "d", "v1", 1),
                chunk_id("t", "l", "d", "v2", 0),
                chunk_id("u", "l", "d", "v1", 0),
            }
        )
        == 4
    )


def test_identity_of_reads_what_it_can() -> None:
    assert identity_of(json.dumps(GOOD).encode()) == {
        "tenant": "acme",
        "library": "docs",
        "document_id": "guides/setup.md",
    }
    assert identity_of(b"\xff") == {}
    assert identity_of(b"[1,2]") == {}
    nested = {"document": {"tenant": "x", "document_id": "y"}}
    assert identity_of(json.dumps(nested).encode()) == {"tenant": "x", "document_id": "y"}


def test_backoff_grows_and_is_capped() -> None:
    delays = [backoff_s(n) for n in range(1, 10)]
    assert delays[:3] == [1.0, 2.0, 4.0]
    assert max(delays) == 60.0


def test_error_replies_become_typed_errors() -> None:
    retryable = ErrorReply(error=ErrorInfo(code="x", message="down", stage="s", retryable=True))
    with pytest.raises(TransientError):
        parse_reply(retryable.model_dump_json().encode(), RerankReply, "reranker")
    final = ErrorReply(error=ErrorInfo(code="bad", message="no", stage="s"))
    with pytest.raises(PermanentError):
        parse_reply(final.model_dump_json().encode(), RerankReply, "reranker")
    with pytest.raises(TransientError, match="not JSON"):
        parse_reply(b"<html>", RerankReply, "reranker")
    ok = RerankReply(model="m", scores=(0.5,))
    assert parse_reply(ok.model_dump_json().encode(), RerankReply, "reranker") == ok


def test_a_dead_lettered_document_s_text_lives_as_long_as_its_dead_letter() -> None:
    """Replay finds the claim-checked text of any dead letter still held (issue 58)."""
    from kbus_contract.topology import Topology

    topology = Topology()
    bodies = topology.bodies_stream.config.max_age
    letters = topology.dead_letter_stream.config.max_age
    assert bodies is not None
    assert letters is not None
    assert bodies >= letters
