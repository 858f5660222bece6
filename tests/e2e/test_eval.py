"""``kbus eval`` end to end on a tiny hand-made BEIR dataset."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.e2e.conftest import Stack
from tests.unit.test_eval_dataset import make_beir


def test_eval_scores_every_mode_and_writes_json_and_markdown(stack: Stack, tmp_path: Path) -> None:
    folder = make_beir(tmp_path / "tiny")
    out = tmp_path / "results"
    env = {**os.environ, "KBUS_NATS_URL": stack.nats_url, "KBUS_BUS_PREFIX": stack.topology.prefix}
    result = subprocess.run(
        # The floor off: q3's only relevant document is unrelated to it on purpose.
        [
            *("kbus", "eval", str(folder), "--results", str(out), "--exclude-self"),
            *("--min-similarity", "-1"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "| hybrid+rerank |" in result.stdout
    scores = json.loads((out / "results.json").read_text())
    assert set(scores["modes"]) == {"keyword", "vector", "hybrid", "hybrid+rerank"}
    for mode in scores["modes"].values():
        assert 0.0 <= mode["ndcg@10"] <= 1.0
    # q1 and q2 are easy; q3's only relevant document is d2, and q3 may not match itself.
    assert scores["modes"]["hybrid"]["recall@100"] == 1.0
    assert scores["documents"] == 4
    assert (out / "results.md").read_text().startswith("**tiny**")
