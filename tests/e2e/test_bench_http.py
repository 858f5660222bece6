"""``python -m bench.http`` runs at a small size: the same searches over NATS and over HTTP, its
report in its file (the ratios are the bench's to claim, in docs/performance.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import made_up_beir


def test_the_http_bench_asks_both_transports_side_by_side(tmp_path: Path) -> None:
    out = tmp_path / "http.json"
    dataset = made_up_beir(tmp_path / "beir", 20, 10)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "bench.http", "--documents", "20", "--queries", "10"),
            *("--concurrency", "4", "--out", str(out), f"--dataset={dataset}"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    for transport in ("nats", "http"):
        assert report[transport]["p50_ms"] > 0
        assert report[transport]["searches_per_s"] > 0
    assert set(report["ratios"]) == {"p50", "throughput"}
