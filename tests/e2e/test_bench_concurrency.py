"""``python -m bench.concurrency`` at a small size: every section runs and measures what it says."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.concurrency import LOADS, run

TOPICS = ("boilers", "badges", "lunch", "parking", "printers", "keys")


def _beir(root: Path, documents: int, queries: int) -> Path:
    """A BEIR folder of made-up documents (SciFact need not be beside the repository)."""
    root.mkdir()
    docs = [
        {
            "_id": f"d{i}",
            "title": f"Note {i} on {TOPICS[i % len(TOPICS)]}",
            "text": f"Item {i}: the {TOPICS[i % len(TOPICS)]} rule number {i} says to ask "
            f"the desk on floor {i % 7} before noon. " * 12,
        }
        for i in range(documents)
    ]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    asked = [
        {"_id": f"q{i}", "text": f"what does rule {i} say about {TOPICS[i % 6]}?"}
        for i in range(queries)
    ]
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in asked) + "\n")
    (root / "qrels").mkdir()
    rows = ["query-id\tcorpus-id\tscore", *(f"q{i}\td{i}\t1" for i in range(queries))]
    (root / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    return root


async def test_the_concurrency_bench_runs_each_variant_as_it_says(tmp_path: Path) -> None:
    args = argparse.Namespace(
        data=_beir(tmp_path / "beir", 30, 12),
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
