"""``python -m bench.concurrency`` at a small size: every section runs and measures what it says."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.concurrency import LOADS, run
from tests.helpers import made_up_beir


async def test_the_concurrency_bench_runs_each_variant_as_it_says(tmp_path: Path) -> None:
    args = argparse.Namespace(
        data=made_up_beir(tmp_path / "beir", 30, 12),
        documents=30,
        queries=12,
        load_documents=10,
        stream_documents=10,
        rounds=1,
        out=tmp_path / "r.json",
    )

    result = await run(args)

    [sent] = result["variants"]["sent"]
    [stored] = result["variants"]["stored"]
    [encoded] = result["variants"]["encoded"]
    for variant in (sent, stored):
        assert variant["passages"].get("stored", 0) > 0
        assert variant["passages"].get("encoded", 0) == 0
    assert sent["queries"].get("sent", 0) > 0
    assert sent["queries"].get("encoded", 0) == 0
    assert stored["queries"].get("encoded", 0) > 0
    assert stored["queries"].get("sent", 0) == 0
    assert encoded["passages"].get("encoded", 0) > 0
    assert encoded["passages"].get("stored", 0) == 0
    for variant in (sent, stored, encoded):
        assert variant["default_32"]["queries"] == 12
        assert variant["first_stage_32"]["queries"] == 12
    cost = result["ingestion_cost"]["chunks_per_s"]
    assert len(cost["kept"]) == len(cost["not kept"]) == 1
    for name in LOADS:
        drained = result["under_load"][name]
        assert drained["loaded"]["queries"] >= 20
        assert 0 < drained["lone_to_searchable_s"] <= drained["drain_s"]
