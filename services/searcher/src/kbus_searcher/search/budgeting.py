"""What a search can still afford within its caller's budget."""

from __future__ import annotations


class RerankCost:
    """How long a rerank is expected to take: a moving average of seconds per candidate.

    Measured by the searcher, from asking to the reply, so it holds the reranker's queue and the
    bus as well as the model: what a search would wait. Slow answers and timeouts count too, so
    a reranker that falls behind soon stops being asked with budgets it cannot meet.
    """

    def __init__(self, weight: float = 0.2) -> None:
        self.weight = weight
        self._per_candidate_s: float | None = None

    def observe(self, candidates: int, seconds: float) -> None:
        """Count one rerank of ``candidates`` that took (or was given up after) ``seconds``."""
        if candidates <= 0:
            return
        sample = seconds / candidates
        previous = self._per_candidate_s
        self._per_candidate_s = (
            sample if previous is None else previous + self.weight * (sample - previous)
        )

    def estimate_s(self, candidates: int) -> float | None:
        """Expected seconds for ``candidates``; None before the first rerank."""
        if self._per_candidate_s is None:
            return None
        return self._per_candidate_s * candidates

    def fits(self, candidates: int, left_s: float) -> bool:
        """Whether a rerank is expected to end within ``left_s``."""
        expected = self.estimate_s(candidates)
        return expected is None or expected <= left_s
