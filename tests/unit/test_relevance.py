"""The no_match decision: similarity and keyword evidence, the request's own floor, the reasons.

The keyword text is read through a stand-in for the store (the integration and end-to-end
tests read Weaviate); the decision is the real code's.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
from kbus_contract import NoMatchReason, SearchRequest, SearchType
from kbus_runtime.analysis import keyword_text
from kbus_searcher.search.relevance import Relevance
from kbus_searcher.store import Candidate, Collections, Scope, StoreView


class Keywords(StoreView):
    """The keyword text of chunks by id, as a caller's view reads them; counts the reads."""

    def __init__(self, texts: dict[str, str]) -> None:
        super().__init__(cast(Collections, None), Scope.of_caller("t", None, ("*",)))
        self.texts = {i: keyword_text("", (), t) for i, t in texts.items()}
        self.reads: list[list[str]] = []

    async def keywords(self, ids: list[str]) -> dict[str, str]:
        self.reads.append(ids)
        return {i: self.texts[i] for i in ids if i in self.texts}


def _candidate(uuid: str, cosine: float | None) -> Candidate:
    return Candidate(uuid, {}, None, cosine, None)


def _request(**fields: Any) -> SearchRequest:
    return SearchRequest(tenant="t", libraries=("lib",), query="mitochondria ageing", **fields)


KEYWORDS = Keywords({"a": "Damage to mitochondria drives ageing in muscle.", "b": "Unrelated."})


async def _baseline(view: StoreView, libraries: Any, model: str) -> float | None:
    return 0.3  # unrelated questions come this close to the library


RULE = Relevance(0.6, 0.5, 0.25, _baseline)


async def test_a_similar_enough_candidate_decides_without_reading_keywords() -> None:
    reads = len(KEYWORDS.reads)
    verdict = await RULE.judge(
        _request(), "mitochondria ageing", "m", [_candidate("a", 0.7)], KEYWORDS
    )
    assert verdict.reason is None
    assert (verdict.evidence, verdict.keyword_coverage) == (0.7, None)
    assert len(KEYWORDS.reads) == reads


async def test_the_query_s_words_in_a_candidate_carry_a_short_query_over_the_floor() -> None:
    verdict = await RULE.judge(
        _request(),
        "mitochondria ageing",
        "m",
        [_candidate("b", 0.2), _candidate("a", 0.3)],
        KEYWORDS,
    )
    assert verdict.reason is None
    assert verdict.keyword_coverage == 1.0  # both terms in candidate a
    assert verdict.evidence == pytest.approx(0.3 + 0.5)
    assert verdict.min_evidence == 0.6


async def test_words_no_candidate_holds_leave_the_evidence_weak() -> None:
    verdict = await RULE.judge(
        _request(), "steak grilling", "m", [_candidate("a", 0.3), _candidate("b", 0.25)], KEYWORDS
    )
    assert verdict.reason is NoMatchReason.WEAK_EVIDENCE
    assert verdict.keyword_coverage == 0.0
    assert verdict.best_similarity == 0.3


async def test_a_similarity_no_coverage_could_lift_is_refused_without_reading() -> None:
    reads = len(KEYWORDS.reads)
    verdict = await RULE.judge(
        _request(), "mitochondria ageing", "m", [_candidate("a", 0.05)], KEYWORDS
    )
    assert verdict.reason is NoMatchReason.WEAK_EVIDENCE
    assert verdict.keyword_coverage is None
    assert len(KEYWORDS.reads) == reads


async def test_nothing_found_is_its_own_reason() -> None:
    assert (
        await RULE.judge(_request(), "q", "m", [], KEYWORDS)
    ).reason is NoMatchReason.NO_CANDIDATES


async def test_a_request_s_own_similarity_floor_replaces_the_rule() -> None:
    found = [_candidate("a", 0.3)]
    strict = await RULE.judge(
        _request(min_similarity=0.5), "mitochondria ageing", "m", found, KEYWORDS
    )
    assert strict.reason is NoMatchReason.BELOW_MIN_SIMILARITY
    assert (strict.min_similarity, strict.min_evidence) == (0.5, None)
    off = await RULE.judge(
        _request(min_similarity=-1), "steak", "m", [_candidate("b", 0.01)], KEYWORDS
    )
    assert off.reason is None


async def test_a_request_may_move_or_turn_off_the_evidence_floor() -> None:
    found = [_candidate("b", 0.3)]
    assert (
        await RULE.judge(_request(min_evidence=0.2), "steak", "m", found, KEYWORDS)
    ).reason is None
    assert (
        await RULE.judge(_request(min_evidence=-1), "steak", "m", found, KEYWORDS)
    ).reason is None
    assert (
        await RULE.judge(_request(), "steak", "m", found, KEYWORDS)
    ).reason is NoMatchReason.WEAK_EVIDENCE


async def test_keyword_search_is_never_cut_for_want_of_similarity() -> None:
    verdict = await RULE.judge(
        _request(search_type=SearchType.KEYWORD), "steak", "m", [_candidate("b", None)], KEYWORDS
    )
    assert verdict.reason is None


async def test_a_similarity_well_above_the_library_s_baseline_is_answered_without_words() -> None:
    # 0.56 is under the 0.6 evidence floor, but 0.26 above what unrelated questions reach.
    verdict = await RULE.judge(_request(), "steak", "m", [_candidate("b", 0.56)], KEYWORDS)
    assert verdict.reason is None
    assert (verdict.baseline_similarity, verdict.keyword_coverage) == (0.3, None)
    near = await RULE.judge(_request(), "steak", "m", [_candidate("b", 0.5)], KEYWORDS)
    assert near.reason is NoMatchReason.WEAK_EVIDENCE
