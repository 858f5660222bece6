"""``python -m bench.access`` at a small size: every mode answers on one library, and the
filtered modes return no more than the unfiltered one."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.access import run
from tests.helpers import made_up_beir


async def test_the_access_bench_runs_every_mode_side_by_side(tmp_path: Path) -> None:
    args = argparse.Namespace(
        dataset=made_up_beir(tmp_path / "beir", 60, 6),
        split="test",
        queries=None,
        abstracts=None,
        seed=7,
        out=tmp_path / "access.json",
    )

    table = await run(args)

    rows = {r["mode"]: r for r in json.loads((tmp_path / "access.json").read_text())["rows"]}
    assert set(rows) == {"unfiltered", "3 groups", "20 groups"}, table
    assert rows["unfiltered"]["results"] > 0
    assert rows["3 groups"]["results"] <= rows["unfiltered"]["results"]
    for r in rows.values():
        assert r["client_p50_ms"] > 0
