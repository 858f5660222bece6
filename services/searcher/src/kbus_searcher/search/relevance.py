"""Whether a search found anything relevant: the ``no_match`` decision.

A floor on the best candidate's cosine alone was calibrated on one dataset's question style and
refused good queries of other styles: a few keywords or a short title embed far from any chunk,
though the library holds every word of them; and the best cosine an unrelated question reaches
grows with the library. So the decision weighs three things:

- ``best_similarity``, the best cosine of the query and a candidate chunk (the model's view);
- ``baseline_similarity``, how close unrelated questions come to the same libraries
  (:mod:`kbus_searcher.search.baseline`, a calibration of each library);
- ``keyword_coverage``, the largest share of the query's content words (function words such as
  "how" or "my" left out) that the keyword text of one of the few candidates keyword search
  scored highest holds (the words' view, which no model calibrates).

A search is answered when its best similarity stands ``baseline_margin`` above the baseline, or
when ``evidence = best_similarity + keyword_weight * keyword_coverage`` reaches
``min_evidence``; otherwise it is ``no_match`` (docs/tuning.md, "KBUS_SEARCHER_MIN_EVIDENCE").
The coverage costs one small read of the store, made only when the rest does not decide. A
request may instead set its own cosine floor (``min_similarity``), or turn either off with -1.
Keyword search has no similarity and is never cut.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from kbus_contract import NoMatchReason, SearchRequest, SearchType
from kbus_runtime.analysis import analyze, content_terms

from kbus_searcher.store import Candidate, StoreView

#: The baseline similarity of libraries, as a view reads them, for a model's queries.
Baseline = Callable[[StoreView, Sequence[str], str], Awaitable[float | None]]
OFF = -1.0


@dataclass(frozen=True)
class Verdict:
    """The decision and what it was made from (all of it goes into the reply)."""

    reason: NoMatchReason | None = None
    best_similarity: float | None = None
    baseline_similarity: float | None = None
    keyword_coverage: float | None = None
    evidence: float | None = None
    min_similarity: float | None = None
    min_evidence: float | None = None


#: Candidates whose keyword texts are read to measure the query's coverage.
KEYWORD_CANDIDATES = 3


@dataclass(frozen=True)
class Relevance:
    """The server's rule and what it reads."""

    min_evidence: float
    keyword_weight: float
    baseline_margin: float
    baseline: Baseline
    candidates: int = KEYWORD_CANDIDATES

    async def judge(
        self,
        req: SearchRequest,
        query: str,
        model: str,
        found: Sequence[Candidate],
        view: StoreView,
    ) -> Verdict:
        """The verdict on a search that ran and found ``found`` (in first-stage order), from
        what ``view`` (the caller's) reads."""
        if not found:
            return Verdict(NoMatchReason.NO_CANDIDATES)
        best = max((c.vector for c in found if c.vector is not None), default=None)
        if req.search_type is SearchType.KEYWORD:
            return Verdict(best_similarity=best)
        if req.min_similarity is not None:
            floor = req.min_similarity
            below = floor > OFF and (best is None or best < floor)
            reason = NoMatchReason.BELOW_MIN_SIMILARITY if below else None
            return Verdict(reason, best, min_similarity=floor)
        floor = self.min_evidence if req.min_evidence is None else req.min_evidence
        if floor <= OFF:
            return Verdict(best_similarity=best)
        similarity = best if best is not None else 0.0
        if similarity >= floor:  # the model alone is sure
            return Verdict(None, best, evidence=similarity, min_evidence=floor)
        baseline = await self.baseline(view, req.libraries, model)
        verdict = Verdict(None, best, baseline, min_evidence=floor)
        if baseline is not None and similarity - baseline >= self.baseline_margin:
            return replace(verdict, evidence=similarity)  # well above unrelated questions
        return await self._weigh(view, query, found, verdict, similarity)

    async def _weigh(
        self,
        view: StoreView,
        query: str,
        found: Sequence[Candidate],
        verdict: Verdict,
        similarity: float,
    ) -> Verdict:
        floor = verdict.min_evidence or 0.0
        coverage = None
        if similarity + self.keyword_weight >= floor:  # the words could still decide it
            best = best_by_keywords(found, self.candidates)
            keywords = await view.keywords([c.uuid for c in best])
            # A chunk placed by a matching text holds that text's words too.
            texts = [f"{keywords.get(c.uuid, '')} {_matched_terms(c)}" for c in best]
            coverage = keyword_coverage(query, texts)
        evidence = similarity + self.keyword_weight * (coverage or 0.0)
        reason = NoMatchReason.WEAK_EVIDENCE if evidence < floor else None
        return replace(verdict, reason=reason, keyword_coverage=coverage, evidence=evidence)


def _matched_terms(candidate: Candidate) -> str:
    matched = candidate.properties.get("matched")
    return analyze(str(matched)) if matched else ""


def best_by_keywords(found: Sequence[Candidate], count: int) -> list[Candidate]:
    """The ``count`` candidates keyword search scored highest (the first ones in order where it
    scored none): where the query's words are, if anywhere."""
    scored = [c for c in found if c.keyword is not None]
    if not scored:
        return list(found[:count])
    return sorted(scored, key=lambda c: -(c.keyword or 0.0))[:count]


def keyword_coverage(query: str, keyword_texts: Sequence[str]) -> float:
    """The largest share of the query's content words (its stems, function words left out)
    that one keyword text holds; 0 for a query of function words only."""
    terms = content_terms(query)
    if not terms:
        return 0.0
    held = (len(terms & set(text.split())) for text in keyword_texts)
    return max(held, default=0) / len(terms)
