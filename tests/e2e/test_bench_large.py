"""``python -m bench.large`` at a small size: a large text and a PDF of many pages beside
many small documents, each followed until searchable, its chunks counted and its times and
the ingestor's memory reported."""

from __future__ import annotations

import json
from pathlib import Path

from bench.large import main
from tests.helpers import made_up_beir


def test_the_large_documents_bench_runs_at_a_small_size(tmp_path: Path) -> None:
    out = tmp_path / "large.json"
    dataset = made_up_beir(tmp_path / "beir", 60, 2)
    code = main(
        ["--sizes=0.3", "--pdf-pages=40", "--small=40", f"--dataset={dataset}", f"--out={out}"]
    )
    result = json.loads(out.read_text())
    pdf, text = result["large"]
    assert pdf["document"] == "pdf-40p"
    assert text["document"] == "text-0.3mb"
    for row in (pdf, text):
        assert row["chunks"] > 20, row  # more than one part: progress was told
        assert 0 < row["first_indexed_s"] <= row["searchable_s"], row
        assert row["rate_vs_small"] is not None
        assert row["ingestor_peak_growth_mb"] >= 0
    # Rates and memory at this size are reported, not judged (docs/performance.md).
    assert code in (0, 1)
