"""Pure helpers of the store: reading Weaviate's hybrid explanation, metadata terms."""

from __future__ import annotations

from kbus_contract import ContentType, DocumentRef, EmbeddedChunk, EmbeddingsReady
from kbus_contract.identifiers import chunk_id
from kbus_searcher.jobs.stored import StoredDocument
from kbus_searcher.store.filters import metadata_terms
from kbus_searcher.store.objects import matching_id, objects_of
from kbus_searcher.store.queries import Candidate, as_chunk, distinct, parse_explain

EXPLAIN = (
    "\nHybrid (Result Set keyword,bm25) Document f02f: original score 0.19748051, "
    "normalized score: 0.3 - \nHybrid (Result Set vector,hybridVector) Document f02f: "
    "original score 0.9805807, normalized score: 0.7"
)


def test_parse_explain_reads_both_raw_scores() -> None:
    assert parse_explain(EXPLAIN) == (0.19748051, 0.9805807)


def test_parse_explain_when_only_one_side_found_the_chunk() -> None:
    vector_only = EXPLAIN.split(" - ")[1]
    assert parse_explain(vector_only) == (None, 0.9805807)
    assert parse_explain(None) == (None, None)
    assert parse_explain("1e-05 garbage") == (None, None)


def test_metadata_terms_cover_scalars_and_lists_only() -> None:
    terms = metadata_terms(
        {
            "lang": "en",
            "year": 2024,
            "draft": False,
            "tags": ["a", "b"],
            "nested": {"x": 1},
            "none": None,
        }
    )
    assert sorted(terms) == ["draft=false", "lang=en", "tags=a", "tags=b", "year=2024"]


def test_a_chunk_the_store_returned_twice_is_kept_once_at_its_first_place() -> None:
    a1, b, a2, c = (
        Candidate(u, {}, None, s, None) for u, s in (("a", 0.9), ("b", 0.8), ("a", 0.5), ("c", 0.7))
    )
    assert [(x.uuid, x.vector) for x in distinct([a1, b, a2, c])] == [
        ("a", 0.9),
        ("b", 0.8),
        ("c", 0.7),
    ]


def _ref(document_id: str, title: str = "") -> DocumentRef:
    return DocumentRef(
        tenant="t",
        library="shop",
        document_id=document_id,
        version="v1",
        title=title,
        source_uri="",
        content_type=ContentType.PLAIN,
        metadata={},
    )


def test_a_chunk_s_matching_texts_are_objects_of_their_own_that_map_back_to_it() -> None:
    chunk = EmbeddedChunk(
        chunk_id=chunk_id("t", "shop", "sheet", "v1", 0),
        position=0,
        text="Trail runner 2.",
        char_start=0,
        char_end=15,
        keywords="trail runner 2",
        vector=(1.0, 0.0),
        matching=("A waterproof running shoe.", "Which shoe grips wet trails?"),
        matching_vectors=((0.0, 1.0), (0.6, 0.8)),
    )
    ref = _ref("sheet", title="Spring")
    ready = EmbeddingsReady(document=ref, model="m", dimension=2, total_chunks=1, chunks=(chunk,))
    own, *matching = objects_of(ready)
    assert (str(own.uuid), own.properties["match"], own.properties["matched"]) == (
        chunk.chunk_id,
        0,
        "",
    )
    assert [o.properties["match"] for o in matching] == [1, 2]
    assert [o.properties["matched"] for o in matching] == list(chunk.matching)
    assert matching[0].properties["text"] == chunk.text  # a hit shows the chunk
    assert matching[0].properties["keywords"] == "spring waterproof run shoe"
    assert matching[1].vector == {"chunk": [0.6, 0.8], "document": [1.0, 0.0]}
    assert len({str(o.uuid) for o in (own, *matching)}) == 3
    assert matching[0].uuid == matching_id(chunk.chunk_id, 1)  # a redelivery overwrites

    found = Candidate(str(matching[1].uuid), {**matching[1].properties}, 1.0, None, None)
    assert as_chunk("t", found).uuid == chunk.chunk_id


def test_re_embedding_keeps_each_chunk_s_matching_texts_in_order() -> None:
    ref = _ref("d")
    row = {
        "uuid": chunk_id("t", "shop", "d", "v1", 0),
        "position": 0,
        "text": "Kettle.",
        "char_start": 0,
        "char_end": 7,
        "heading_path": [],
        "keywords": "kettl",
        "page": 0,
        "metadata_json": "{}",
        "match": 0,
        "matched": "",
    }
    stored = StoredDocument(ref, [])
    for match, text in ((2, "Which kettle is fast?"), (0, ""), (1, "A kettle for tea.")):
        stored.add({**row, "match": match, "matched": text})
    stored.ordered()
    [chunk] = stored.chunks
    assert chunk.matching == ("A kettle for tea.", "Which kettle is fast?")
