"""Loading BEIR folders: a hand-made one, and SciFact where it is present."""

from __future__ import annotations

from pathlib import Path

import pytest
from kbus_cli.evaluation import Dataset

from tests.helpers import make_beir

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "scifact"


def test_loads_a_beir_folder(tmp_path: Path) -> None:
    data = Dataset.load(make_beir(tmp_path / "tiny"), "test")
    assert data.name == "tiny"
    assert len(data.corpus) == 4
    assert data.qrels == {"q1": {"d1": 1}, "q2": {"d3": 1}, "q3": {"d2": 1}}
    assert data.queries["q2"] == "honey bees"
    small = Dataset.load(tmp_path / "tiny", "test", max_queries=1, max_documents=2)
    assert list(small.qrels) == ["q1"]
    assert [d["_id"] for d in small.corpus] == ["d1", "d2"]  # judged documents first


@pytest.mark.skipif(not SCIFACT.is_dir(), reason="SciFact is not beside the repository")
def test_scifact_has_the_published_counts() -> None:
    test = Dataset.load(SCIFACT, "test")
    train = Dataset.load(SCIFACT, "train")
    assert len(test.corpus) == 5183
    assert len(test.qrels) == 300
    assert len(train.qrels) == 809
