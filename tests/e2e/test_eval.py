"""``kbus eval`` end to end on a tiny hand-made BEIR dataset."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from kbus_contract import MAX_QUERY_CHARS

from tests.e2e.conftest import Stack
from tests.helpers import make_beir


def _eval(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KBUS_NATS_URL": stack.nats_url, "KBUS_BUS_PREFIX": stack.topology.prefix}
    return subprocess.run(
        ["kbus", "eval", *args], env=env, capture_output=True, text=True, timeout=600
    )


def test_eval_scores_every_mode_and_writes_json_and_markdown(stack: Stack, tmp_path: Path) -> None:
    folder = make_beir(tmp_path / "tiny")
    # A query past the contract's limit: refused, recorded, scored 0; the run goes on.
    with (folder / "queries.jsonl").open("a") as queries:
        queries.write(json.dumps({"_id": "q4", "text": "bees " * MAX_QUERY_CHARS}) + "\n")
    with (folder / "qrels" / "test.tsv").open("a") as qrels:
        qrels.write("q4\td3\t1\n")
    out = tmp_path / "results"
    # The floor off: q3's only relevant document is unrelated to it on purpose.
    result = _eval(
        stack,
        str(folder),
        "--results",
        str(out),
        "--exclude-self",
        "--min-evidence",
        "-1",
        "--keep-library",
    )
    assert result.returncode == 0, result.stderr
    assert "| hybrid+rerank |" in result.stdout
    scores = json.loads((out / "results.json").read_text())
    assert set(scores["modes"]) == {"keyword", "vector", "hybrid", "hybrid+rerank"}
    for mode, errors in scores["errors"].items():
        assert list(errors) == ["q4"], mode
        assert str(MAX_QUERY_CHARS) in errors["q4"]
        assert 0.0 <= scores["modes"][mode]["ndcg@10"] <= 0.75  # q4 counts as 0 of 4
    # q1 and q2 are easy; q3's only relevant document is d2, and q3 may not match itself.
    assert scores["modes"]["hybrid"]["recall@100"] == 0.75
    assert scores["documents"] == 4
    assert (out / "results.md").read_text().startswith("**tiny**")
    runs = (out / "runs.jsonl").read_text().splitlines()
    assert len(runs) == 4 * 4  # every query of every mode, as it was answered

    # The same library in another query style: each judged document's title asks for it.
    titles = _eval(
        stack,
        str(folder),
        "--results",
        str(tmp_path / "titles"),
        "--style",
        "title",
        "--mode",
        "hybrid",
        "--library",
        scores["library"],
    )
    assert titles.returncode == 0, titles.stderr
    by_title = json.loads((tmp_path / "titles" / "results.json").read_text())
    assert by_title["style"] == "title"
    assert by_title["queries"] == 3  # d1, d2 and d3 are judged relevant
    assert by_title["modes"]["hybrid"]["ndcg@10"] == 1.0

    # A dataset larger than the library: the run says its scores are not the dataset's.
    bigger = make_beir(tmp_path / "bigger")
    with (bigger / "corpus.jsonl").open("a") as corpus:
        corpus.write(json.dumps({"_id": "d9", "title": "Extra", "text": "An extra note."}) + "\n")
    short_out = tmp_path / "short"
    library = scores["library"]
    short = _eval(stack, str(bigger), "--results", str(short_out), "--library", library)
    assert short.returncode == 0, short.stderr
    assert "holds 4 documents of the dataset's 5" in short.stderr, short.stderr
    assert "holds 4 documents of the dataset's 5" in (short_out / "results.md").read_text()


def test_an_eval_that_ingests_deletes_its_library_at_the_end(stack: Stack, tmp_path: Path) -> None:
    out = tmp_path / "gone"
    done = _eval(
        stack, str(make_beir(tmp_path / "tiny")), "--results", str(out), "--mode", "keyword"
    )
    assert done.returncode == 0, done.stderr
    library = json.loads((out / "results.json").read_text())["library"]
    assert f"library {library!r} deleted" in done.stderr, done.stderr
    env = {**os.environ, "KBUS_NATS_URL": stack.nats_url, "KBUS_BUS_PREFIX": stack.topology.prefix}
    listed = subprocess.run(
        ["kbus", "libraries", "--tenant", "eval", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert library not in {lib["library"] for lib in json.loads(listed.stdout)}, listed.stdout
