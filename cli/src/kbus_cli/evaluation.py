"""``kbus eval``: retrieval quality on a BEIR-layout dataset, through the real bus.

The corpus is published on ``document.added`` into a fresh library, every document is awaited
until indexed, then every query of a split is sent as a search request once per retrieval mode,
with results grouped by document (the qrels judge documents: a document's rank is its best
chunk's rank).
"""

from __future__ import annotations

import asyncio
import csv
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbus_client import DocumentRejectedError, KbClient, KbError

from kbus_cli.metrics import evaluate

MODES: dict[str, dict[str, Any]] = {
    "keyword": {"search_type": "keyword", "rerank": False},
    "vector": {"search_type": "vector", "rerank": False},
    "hybrid": {"search_type": "hybrid", "rerank": False},
    "hybrid+rerank": {"search_type": "hybrid", "rerank": True},
}
DEPTH = 100


@dataclass
class Dataset:
    """A BEIR folder: corpus, queries and the qrels of one split."""

    name: str
    corpus: list[dict[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]

    @classmethod
    def load(
        cls,
        folder: Path,
        split: str,
        max_queries: int | None = None,
        max_documents: int | None = None,
    ) -> Dataset:
        corpus = [json.loads(line) for line in (folder / "corpus.jsonl").open() if line.strip()]
        queries = {
            q["_id"]: q["text"]
            for q in (
                json.loads(line) for line in (folder / "queries.jsonl").open() if line.strip()
            )
        }
        qrels: dict[str, dict[str, int]] = {}
        with (folder / "qrels" / f"{split}.tsv").open() as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
        judged = sorted(qrels, key=_natural)[:max_queries] if max_queries else sorted(qrels)
        qrels = {q: qrels[q] for q in judged}
        if max_documents:
            relevant = {d for judgements in qrels.values() for d in judgements}
            keep = [d for d in corpus if d["_id"] in relevant]
            keep += [d for d in corpus if d["_id"] not in relevant][
                : max(0, max_documents - len(keep))
            ]
            corpus = keep
        return cls(folder.name, corpus, queries, qrels)


def _natural(key: str) -> tuple[int, str]:
    return (int(key), "") if key.isdigit() else (1 << 60, key)


@dataclass
class EvalResult:
    """Everything one run measured."""

    dataset: str
    split: str
    library: str
    documents: int
    queries: int
    ingest_seconds: float
    rejected: list[str] = field(default_factory=list)
    modes: dict[str, dict[str, float]] = field(default_factory=dict)
    query_seconds: dict[str, float] = field(default_factory=dict)
    no_match: dict[str, int] = field(default_factory=dict)
    off_topic_questions: int = 0
    off_topic_no_match: int = 0


Progress = Callable[[str, int, int], None]


async def ingest(
    kb: KbClient, data: Dataset, library: str, progress: Progress, concurrency: int = 64
) -> tuple[float, list[str]]:
    """Publish the corpus and wait until every document is indexed."""
    limit = asyncio.Semaphore(concurrency)
    done = 0
    rejected: list[str] = []

    async def one(doc: dict[str, str]) -> None:
        nonlocal done
        async with limit:
            try:
                await kb.publish_document(
                    library=library,
                    document_id=doc["_id"],
                    title=doc.get("title", ""),
                    text=doc["text"] if doc["text"].strip() else doc.get("title", "") or "-",
                    wait=True,
                    timeout_s=3_600,
                )
            except (DocumentRejectedError, ValueError, TimeoutError) as exc:
                rejected.append(f"{doc['_id']}: {exc}")
            done += 1
            progress("ingest", done, len(data.corpus))

    started = time.perf_counter()
    await asyncio.gather(*(one(d) for d in data.corpus))
    return time.perf_counter() - started, rejected


async def run_mode(
    kb: KbClient,
    data: Dataset,
    library: str,
    mode: str,
    exclude_self: bool,
    progress: Progress,
    concurrency: int = 4,
    alpha: float | None = None,
    min_similarity: float | None = None,
    rerank_depth: int | None = None,
) -> tuple[dict[str, list[str]], float, int]:
    """Ranked document ids per query for one retrieval mode, the time, and no_match replies.

    ``alpha`` and ``rerank_depth`` are the server's defaults when None.
    """
    limit = asyncio.Semaphore(concurrency)
    run: dict[str, list[str]] = {}
    no_match = 0

    async def one(query_id: str) -> None:
        nonlocal no_match
        async with limit:
            reply = await kb.search(
                data.queries[query_id],
                libraries=[library],
                k=DEPTH,
                group_by_document=True,
                exclude_documents=(query_id,) if exclude_self else (),
                timeout_s=300,
                alpha=alpha,
                min_similarity=min_similarity,
                rerank_depth=rerank_depth,
                **MODES[mode],
            )
            run[query_id] = [hit.document_id for hit in reply.results]
            no_match += reply.no_match
            progress(_label(mode, alpha, rerank_depth), len(run), len(data.qrels))

    started = time.perf_counter()
    await asyncio.gather(*(one(q) for q in data.qrels))
    return run, time.perf_counter() - started, no_match


async def count_no_match(kb: KbClient, library: str, questions: list[str]) -> int:
    """How many questions get ``no_match`` from a default search of the library."""
    replies = await asyncio.gather(
        *(kb.search(q, libraries=[library], rerank=False, timeout_s=300) for q in questions)
    )
    return sum(r.no_match for r in replies)


async def evaluate_dataset(
    kb: KbClient,
    data: Dataset,
    split: str,
    modes: list[str],
    exclude_self: bool,
    progress: Progress,
    library: str | None = None,
    alphas: list[float] | None = None,
    off_topic: list[str] | None = None,
    min_similarity: float | None = None,
    rerank_depth: int | None = None,
) -> EvalResult:
    """Ingest (unless the library is given and already indexed) and score every mode.

    With ``alphas``, each hybrid mode runs once per alpha (for tuning on a train split).
    """
    fresh = library is None
    library = library or f"{data.name}-{uuid.uuid4().hex[:8]}".lower()
    result = EvalResult(data.name, split, library, len(data.corpus), len(data.qrels), 0.0)
    if fresh:
        result.ingest_seconds, result.rejected = await ingest(kb, data, library, progress)
    for mode in modes:
        hybrid = MODES[mode]["search_type"] == "hybrid"
        depth = rerank_depth if MODES[mode]["rerank"] else None
        choices: list[float | None] = [None]
        if hybrid and alphas:
            choices = list(alphas)
        for alpha in choices:
            label = _label(mode, alpha, depth)
            try:
                run, seconds, no_match = await run_mode(
                    kb,
                    data,
                    library,
                    mode,
                    exclude_self,
                    progress,
                    alpha=alpha,
                    min_similarity=min_similarity,
                    rerank_depth=depth,
                )
            except KbError as exc:
                raise RuntimeError(f"mode {label} failed: {exc}") from exc
            result.modes[label] = evaluate(run, data.qrels)
            result.query_seconds[label] = seconds
            result.no_match[label] = no_match
    if off_topic:
        result.off_topic_questions = len(off_topic)
        result.off_topic_no_match = await count_no_match(kb, library, off_topic)
    return result


def _label(mode: str, alpha: float | None, rerank_depth: int | None = None) -> str:
    settings = ([f"alpha {alpha:g}"] if alpha is not None else []) + (
        [f"depth {rerank_depth}"] if rerank_depth is not None else []
    )
    return f"{mode} ({', '.join(settings)})" if settings else mode


def markdown(result: EvalResult) -> str:
    """The results as a Markdown table."""
    lines = [
        f"**{result.dataset}** ({result.split}: {result.queries} queries, "
        f"{result.documents} documents; ingestion {result.ingest_seconds:.0f} s)",
        "",
        "| mode | nDCG@10 | Recall@10 | Recall@100 | MRR@10 | no_match | query time (s) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for mode, scores in result.modes.items():
        lines.append(
            f"| {mode} | {scores['ndcg@10']:.4f} | {scores['recall@10']:.4f} | "
            f"{scores['recall@100']:.4f} | {scores['mrr@10']:.4f} | "
            f"{result.no_match.get(mode, 0)} | {result.query_seconds[mode]:.0f} |"
        )
    if result.off_topic_questions:
        lines += [
            "",
            f"Off-topic questions answered no_match: {result.off_topic_no_match} of "
            f"{result.off_topic_questions}.",
        ]
    return "\n".join(lines) + "\n"
