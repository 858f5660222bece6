"""Pure helpers of the store: reading Weaviate's hybrid explanation, metadata terms."""

from __future__ import annotations

from kbus_searcher.store.filters import metadata_terms
from kbus_searcher.store.queries import Candidate, distinct, parse_explain

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
