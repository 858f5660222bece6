"""Loading BEIR folders: a hand-made one, and SciFact where it is present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kbus_cli.evaluation import Dataset

SCIFACT = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "scifact"


def make_beir(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    docs = [
        {"_id": "d1", "title": "Cats", "text": "Cats purr when they are content."},
        {"_id": "d2", "title": "Dogs", "text": "Dogs bark at the postman every morning."},
        {"_id": "d3", "title": "Bees", "text": "Bees make honey from the nectar of flowers."},
        {"_id": "q3", "title": "Self", "text": "A document whose id is also a query id."},
    ]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    queries = [
        {"_id": "q1", "text": "why do cats purr"},
        {"_id": "q2", "text": "honey bees"},
        {"_id": "q3", "text": "a document whose id is also a query id"},
    ]
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t1\nq3\td2\t1\n"
    )
    return root


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
