"""``kbus eval`` keeps going past a failed query and writes what it measured as it goes.

The search is a stand-in (the end-to-end test runs the real one); what is checked is the
evaluation's own bookkeeping.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kbus_cli.evaluation import Dataset, Mode, Recorder, evaluate_dataset
from kbus_client import KbError
from kbus_contract import LibraryStats, SearchReply, StatsReply
from kbus_contract.errors import TransientError

from tests.helpers import search_reply as _reply


class Searcher:
    """Answers q1 with d1, refuses q2, and fails the whole second mode once it has begun."""

    tenant = "eval"

    def __init__(self, refusals: int = 0, held: int = 1) -> None:
        self.calls = 0
        self.refusals = refusals
        self.held = held

    async def stats(self) -> StatsReply:
        libraries = (LibraryStats(library="lib", documents=self.held, chunks=self.held),)
        return StatsReply(tenant=self.tenant, libraries=libraries)

    async def search(self, query: str, **options: Any) -> SearchReply:
        self.calls += 1
        if self.refusals:
            self.refusals -= 1
            raise TransientError(
                "over 100 searches a second", code="quota_exceeded", retry_after_s=0.01
            )
        if query == "too long":
            raise ValueError("query: String should have at most 32768 characters")
        if options.get("search_type") == "keyword":
            raise KbError("no searcher is running", code="searcher_unavailable")
        return _reply("d1")


DATA = Dataset(
    "tiny",
    corpus=[{"_id": "d1", "title": "", "text": "x"}],
    queries={"q1": "fine", "q2": "too long"},
    qrels={"q1": {"d1": 1}, "q2": {"d1": 1}},
)


async def test_a_failed_query_is_scored_zero_with_its_reason_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    searcher = Searcher()
    result = await evaluate_dataset(
        searcher,  # type: ignore[arg-type]
        DATA,
        "test",
        [Mode("hybrid"), Mode("keyword")],
        False,
        lambda *_: None,
        Recorder(tmp_path),
        library="lib",
    )
    assert result.modes["hybrid"]["ndcg@10"] == pytest.approx(0.5)  # q2 counts as 0
    assert list(result.errors["hybrid"]) == ["q2"]
    assert "32768" in result.errors["hybrid"]["q2"]
    assert set(result.errors["keyword"]) == {"q1", "q2"}  # every query of that mode failed
    assert searcher.calls == 4
    saved = json.loads((tmp_path / "results.json").read_text())
    assert set(saved["modes"]) == {"hybrid", "keyword"}
    assert "| hybrid | 0.5000 |" in (tmp_path / "results.md").read_text()
    lines = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert len(lines) == 4
    assert {"mode": "hybrid", "query": "q1", "documents": ["d1"], "no_match": False} in lines


async def test_scores_are_on_disk_after_each_mode(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path)
    saved: list[set[str]] = []
    original = recorder.save

    def save(result: Any) -> None:
        original(result)
        saved.append(set(json.loads((tmp_path / "results.json").read_text())["modes"]))

    recorder.save = save  # type: ignore[method-assign]
    await evaluate_dataset(
        Searcher(),  # type: ignore[arg-type]
        DATA,
        "test",
        [Mode("hybrid"), Mode("vector")],
        False,
        lambda *_: None,
        recorder,
        library="lib",
    )
    assert saved == [{"hybrid"}, {"hybrid", "vector"}]


async def test_a_search_refused_by_the_quota_is_asked_again_never_scored_a_miss(
    tmp_path: Path,
) -> None:
    searcher = Searcher(refusals=7)
    result = await evaluate_dataset(
        searcher,  # type: ignore[arg-type]
        DATA,
        "test",
        [Mode("hybrid")],
        False,
        lambda *_: None,
        Recorder(tmp_path),
        library="lib",
    )
    assert "q1" not in result.errors["hybrid"]
    assert searcher.calls == 2 + 7


async def test_an_empty_or_unknown_library_is_an_error_not_a_run_of_zeros(tmp_path: Path) -> None:
    for library, held in (("lib", 0), ("elsewhere", 5)):
        with pytest.raises(ValueError, match="holds no documents"):
            await evaluate_dataset(
                Searcher(held=held),  # type: ignore[arg-type]
                DATA,
                "test",
                [Mode("hybrid")],
                False,
                lambda *_: None,
                Recorder(tmp_path),
                library=library,
            )
