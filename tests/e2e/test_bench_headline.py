"""``python -m bench`` (the headline bench) at a small size, to its end: the floors, kbus's
ingestion twice, a lone document, the queries taking turns with their floor, the embedder
service fed from the stream beside the bare encoder (the phase that once drained nothing: the
bench publishes its chunks.ready itself, and the embedder's tenant lanes must see that work),
its scaling, and the bus and framework floor. LlamaIndex is left out (its packages are the bench
group's, not the tests', and so is the plot's matplotlib); the figures at full size are
docs/performance.md's."""

from __future__ import annotations

import json
from pathlib import Path

from bench.__main__ import main
from tests.helpers import made_up_beir


async def test_the_headline_bench_runs_to_its_end(tmp_path: Path) -> None:
    out = tmp_path / "results"
    await main(
        [
            f"--dataset={made_up_beir(tmp_path / 'beir', 40, 8)}",
            "--documents=40",
            "--queries=8",
            "--stream-documents=20",
            "--scaling-documents=10",
            "--drift-documents=5",
            "--framework-documents=20",
            "--no-peer",
            "--no-plot",
            f"--out={out}",
        ]
    )
    result = json.loads((out / "results.json").read_text())
    chunks = result["chunks"]
    assert chunks > 40
    first, again = result["ingestion"]["runs"]
    assert first["chunks_per_s"] > 0, result["ingestion"]
    assert again["chunks_per_s"] > 0, result["ingestion"]
    assert result["stream_embedder"]["chunks_per_s"] > 0
    assert [s["processes"] for s in result["scaling"]] == [1, 2, 3]
    assert result["query"]["bus"]
    assert result["query"]["floor"]
    assert "framework_floor" in result
    assert (out / "summary.md").read_text().strip()
