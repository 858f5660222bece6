"""``python -m bench.context`` at a small size: every mode runs on one index, each context holds
within its budget, and a budget never moves a search's results."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.context import run
from tests.helpers import made_up_beir


async def test_the_context_bench_runs_every_mode_side_by_side(tmp_path: Path) -> None:
    args = argparse.Namespace(
        dataset=made_up_beir(tmp_path / "beir", 40, 4),
        split="test",
        queries=None,
        abstracts=None,
        group=10,
        budgets="256,512",
        fixed_k=3,
        seed=7,
        set=[],
        out=tmp_path / "context.json",
    )

    table = await run(args)

    rows = {r["mode"]: r for r in json.loads((tmp_path / "context.json").read_text())["rows"]}
    assert len(rows) == 2 * 4 + 2 * 4, table
    for r in rows.values():
        assert r["results_moved"] == 0, r
        budget = int(r["mode"].split()[0])
        assert 0 < r["tokens"] <= budget, r
    # A section holds the whole relevant note more often than its top chunks alone do.
    assert rows["512 section budget"]["whole_section"] >= rows["512 none k=3"]["whole_section"]
    assert rows["512 section budget"]["evidence_recall"] > 0
