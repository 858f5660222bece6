"""The first stage's order: the chunk's own score blended with its document's."""

from __future__ import annotations

import pytest
from kbus_contract import SearchType
from kbus_searcher.search.blending import blend, rank, reranker_name, score_kind
from kbus_searcher.search.ranking import first_stage, order
from kbus_searcher.store import Candidate


def _c(uuid: str, fused: float, document: float | None, cosine: float = 0.5) -> Candidate:
    props = {"document_id": uuid, "library": "lib", "metadata_json": "{}"}
    return Candidate(uuid, props, 1.0, cosine, fused, document)


def test_the_document_score_is_normalised_over_the_candidates_and_blended() -> None:
    found = [_c("a", 1.0, 0.30), _c("b", 0.9, 0.50), _c("c", 0.2, 0.40)]
    firsts = first_stage(found, SearchType.HYBRID, 0.1)
    assert firsts == pytest.approx([0.9 * 1.0 + 0.1 * 0.0, 0.9 * 0.9 + 0.1, 0.9 * 0.2 + 0.05])
    assert first_stage(found, SearchType.HYBRID, 0.0) == [1.0, 0.9, 0.2]


def test_a_strong_document_lifts_its_chunk_past_a_close_one() -> None:
    found = [_c("a", 0.95, 0.1), _c("b", 0.94, 0.9)]
    firsts = first_stage(found, SearchType.HYBRID, 0.1)
    assert [found[i].uuid for i in order(found, firsts)] == ["b", "a"]


def test_vector_search_blends_the_cosine_and_keyword_search_keeps_bm25() -> None:
    found = [_c("a", 0.0, 0.2, cosine=0.8), _c("b", 0.0, 0.6, cosine=0.7)]
    assert first_stage(found, SearchType.VECTOR, 0.5) == pytest.approx([0.4, 0.85])
    assert first_stage(found, SearchType.KEYWORD, 0.5) == [1.0, 1.0]
    assert score_kind(SearchType.VECTOR, False, 0.5) == "first_stage"
    assert score_kind(SearchType.KEYWORD, False, 0.5) == "bm25"
    assert score_kind(SearchType.HYBRID, True, 0.5) == "rerank"


def test_without_every_document_score_the_order_is_the_chunks_own() -> None:
    found = [_c("a", 0.5, None), _c("b", 0.4, 0.9)]
    assert first_stage(found, SearchType.HYBRID, 0.1) == [0.5, 0.4]


def test_hits_say_every_score_and_reranked_ones_come_first() -> None:
    found = [_c("a", 1.0, 0.3), _c("b", 0.6, 0.5), _c("c", 0.5, 0.4)]
    firsts = [0.9, 0.64, 0.47]
    hits = rank(found, firsts, [0.2, 0.8])
    assert [h.chunk_id for h in hits] == ["b", "a", "c"]
    b = hits[0].scores
    assert (b.fused, b.document, b.first_stage, b.rerank, b.final) == (0.6, 0.5, 0.64, 0.8, 0.8)
    assert hits[2].scores.final == 0.47


def test_the_reranker_s_scores_are_blended_with_the_first_stage_s_in_the_searcher() -> None:
    assert blend([0.9, 0.2], [0.5, 0.5], 0.6) == pytest.approx([0.4 + 0.3, 0.0 + 0.3])
    assert blend([0.9, 0.2], [0.5, 0.5], 0.0) == pytest.approx([0.9, 0.2])  # its own
    assert blend([0.3, 0.3], [1.0, 0.0], 0.5) == pytest.approx([1.0, 0.5])  # a tie: all 1
    assert reranker_name("maxsim/m", 0.6) == "maxsim/m+prior(0.6)"
    assert reranker_name("maxsim/m", 0.0) == "maxsim/m"
    assert reranker_name("", 0.6) == ""  # not reranked: nothing to name


def test_reranked_hits_are_ordered_by_the_blend_and_the_rest_follow_in_first_stage_order() -> None:
    found = [_c(f"c{i}", 0.5, None) for i in range(4)]
    hits = rank(found, [0.9, 0.8, 0.7, 0.6], [0.1, 0.9], prior_weight=0.5)
    assert [h.chunk_id for h in hits] == ["c1", "c0", "c2", "c3"]
    assert [h.scores.final for h in hits] == pytest.approx([0.9, 0.45, 0.7, 0.6])
    assert hits[0].scores.rerank == pytest.approx(0.9)
