"""``python -m bench.neighbour --mode search`` at a small size, its goals asserted: a tenant's
costly searches (k=100, rerank_depth=50, 32,768-token whole-document contexts of a 300-word
query, asked again at once past every refusal) beside another tenant's small documents and
ordinary searches, side by side with the quiet run. The other tenant's search p95 stays within
fifteen times its quiet p95 (counted in messages it was 63 times; the bench's goal, three times,
is measured at full size in docs/performance.md: at this size on a shared 2-core CI machine the
p95 is the second slowest of 40 searches and a quiet p95 of ~20 ms makes the ratio swing between
2.7 and 5.6, once 10.8 in a fresh make test), its documents become searchable
within 10 s, and nothing of it is refused or lost. (The flood of large documents is held to
its share by ``tests/integration/test_fair_work.py`` and ``tests/e2e/test_withdrawn_work.py``;
the modes together are measured by ``make bench-neighbour``, docs/performance.md.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.neighbour import main

pytestmark = pytest.mark.alone


def test_a_costly_searcher_costs_another_tenant_no_more_than_its_share(tmp_path: Path) -> None:
    out = tmp_path / "neighbour.json"
    code = main(
        [
            "--mode=search",
            "--seconds=25",
            "--quiet-s=20",
            "--after-s=20",
            "--seed-documents=1",
            f"--out={out}",
        ]
    )
    result = json.loads(out.read_text())
    goals = result["goals"]
    assert goals["victim_never_refused_nor_lost"], result
    assert goals["searchable_p99_at_most_10_s"], result["flood"]
    assert result["search_p95_ratio"] <= 15, (result["search_p95_ratio"], result["flood"])
    assert result["attacker"].get("quota_exceeded", 0) > 0  # held to its budgets
    assert code in (0, 1)  # back to quiet is reported (the flood's backlog drains meanwhile)
