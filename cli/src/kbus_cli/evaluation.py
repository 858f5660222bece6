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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kbus_client import DocumentRejectedError, KbClient, KbError
from kbus_contract import SearchReply
from kbus_contract.errors import ErrorCode, TransientError

from kbus_cli.metrics import evaluate
from kbus_cli.styles import make_queries

#: The plain modes never rewrite, so a server with a query rewriter configured scores them as
#: one without; the +rewrite modes (run only when named) ask for it.
MODES: dict[str, dict[str, Any]] = {
    "keyword": {"search_type": "keyword", "rerank": False, "rewrite": False},
    "vector": {"search_type": "vector", "rerank": False, "rewrite": False},
    "hybrid": {"search_type": "hybrid", "rerank": False, "rewrite": False},
    "hybrid+rerank": {"search_type": "hybrid", "rerank": True, "rewrite": False},
    "hybrid+rewrite": {"search_type": "hybrid", "rerank": False, "rewrite": True},
    "hybrid+rerank+rewrite": {"search_type": "hybrid", "rerank": True, "rewrite": True},
}
DEFAULT_MODES = ("keyword", "vector", "hybrid", "hybrid+rerank")
DEPTH = 100


@dataclass
class Dataset:
    """A BEIR folder: corpus, queries and the qrels of one split."""

    name: str
    corpus: list[dict[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    style: str = "question"
    #: Documents a query must not return (a sibling query's own document).
    excluded: dict[str, tuple[str, ...]] = field(default_factory=dict)

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

    def with_style(self, style: str) -> Dataset:
        """The same corpus with queries of another style made from the judged documents
        (:mod:`kbus_cli.styles`); ``question`` is the dataset's own."""
        if style == "question":
            return self
        corpus = {d["_id"]: d for d in self.corpus}
        queries, qrels, excluded = make_queries(style, corpus, self.qrels)
        return replace(self, queries=queries, qrels=qrels, style=style, excluded=excluded)


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
    style: str = "question"
    rejected: list[str] = field(default_factory=list)
    modes: dict[str, dict[str, float]] = field(default_factory=dict)
    query_seconds: dict[str, float] = field(default_factory=dict)
    no_match: dict[str, int] = field(default_factory=dict)
    #: Per mode, the queries that failed (refused or unanswered) and why; each scored 0.
    errors: dict[str, dict[str, str]] = field(default_factory=dict)
    off_topic_questions: int = 0
    off_topic_no_match: int = 0
    #: What makes the scores say less than they seem to (a library missing documents).
    warnings: list[str] = field(default_factory=list)


class Recorder:
    """Writes what a run measured as it comes: each query's answer to ``runs.jsonl`` at once,
    the scores to ``results.json`` and ``results.md`` after each mode, so a run that dies late
    keeps what it measured."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "runs.jsonl").write_text("")

    def query(self, mode: str, query_id: str, documents: list[str], **about: Any) -> None:
        """One query's ranked documents (and its no_match or error)."""
        if self.folder is None:
            return
        line = json.dumps({"mode": mode, "query": query_id, "documents": documents, **about})
        with (self.folder / "runs.jsonl").open("a") as runs:
            runs.write(line + "\n")

    def save(self, result: EvalResult) -> None:
        """The scores so far."""
        if self.folder is None:
            return
        (self.folder / "results.json").write_text(json.dumps(asdict(result), indent=2))
        (self.folder / "results.md").write_text(markdown(result))


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


@dataclass(frozen=True)
class Mode:
    """One retrieval mode as run: its name and the settings that differ from the server's."""

    name: str
    alpha: float | None = None
    rerank_depth: int | None = None
    min_similarity: float | None = None
    min_evidence: float | None = None

    @property
    def label(self) -> str:
        settings = ([f"alpha {self.alpha:g}"] if self.alpha is not None else []) + (
            [f"depth {self.rerank_depth}"] if self.rerank_depth is not None else []
        )
        return f"{self.name} ({', '.join(settings)})" if settings else self.name


@dataclass
class ModeRun:
    """What one mode answered: ranked documents, no_match replies and failed queries."""

    ranked: dict[str, list[str]] = field(default_factory=dict)
    no_match: int = 0
    errors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


async def run_mode(
    kb: KbClient,
    data: Dataset,
    library: str,
    mode: Mode,
    exclude_self: bool,
    progress: Progress,
    recorder: Recorder,
    concurrency: int = 4,
) -> ModeRun:
    """Every query of the split in one mode. A query that is refused or fails is recorded
    with its reason and scores 0; the others go on."""
    limit = asyncio.Semaphore(concurrency)
    out = ModeRun()

    async def one(query_id: str) -> None:
        async with limit:
            try:
                reply = await paced(
                    kb,
                    data.queries[query_id],
                    libraries=[library],
                    k=DEPTH,
                    group_by_document=True,
                    exclude_documents=((query_id,) if exclude_self else ())
                    + data.excluded.get(query_id, ()),
                    timeout_s=300,
                    alpha=mode.alpha,
                    min_similarity=mode.min_similarity,
                    min_evidence=mode.min_evidence,
                    rerank_depth=mode.rerank_depth,
                    **MODES[mode.name],
                )
            except (KbError, ValueError, TimeoutError) as exc:
                out.errors[query_id] = f"{type(exc).__name__}: {exc}"[:500]
                out.ranked[query_id] = []
                recorder.query(mode.label, query_id, [], error=out.errors[query_id])
            else:
                out.ranked[query_id] = [hit.document_id for hit in reply.results]
                out.no_match += reply.no_match
                rewritten = (
                    {"searched": reply.query, "rewrite_ms": reply.timings.rewrite_ms}
                    if MODES[mode.name]["rewrite"]
                    else {}
                )
                recorder.query(
                    mode.label,
                    query_id,
                    out.ranked[query_id],
                    no_match=reply.no_match,
                    **rewritten,
                )
            progress(mode.label, len(out.ranked), len(data.qrels))

    started = time.perf_counter()
    await asyncio.gather(*(one(q) for q in data.qrels))
    out.seconds = time.perf_counter() - started
    return out


#: How long a search refused by the tenant's quota is asked again before it counts as failed.
QUOTA_PATIENCE_S = 300.0


async def paced(kb: KbClient, query: str, **options: Any) -> SearchReply:
    """A search asked again, after the wait the refusal names, for as long as the tenant's
    search quota refuses it: a refusal is never scored as a miss."""
    deadline = time.monotonic() + QUOTA_PATIENCE_S
    while True:
        try:
            return await kb.search(query, **options)
        except TransientError as exc:
            if exc.code != ErrorCode.QUOTA_EXCEEDED or time.monotonic() > deadline:
                raise
            await asyncio.sleep(exc.retry_after_s or 1.0)


async def require_documents(kb: KbClient, library: str) -> int:
    """How many documents the library holds; ``ValueError`` unless it holds some of the
    client's tenant: a run over an empty or misnamed library would score zeros."""
    held = {lib.library: lib.documents for lib in (await kb.stats()).libraries}
    if not held.get(library):
        named = ", ".join(sorted(held)) or "none"
        raise ValueError(
            f"library {library!r} of tenant {kb.tenant!r} holds no documents (its libraries: "
            f"{named}); leave out --library to ingest the dataset"
        )
    return held[library]


def short_of(library: str, held: int, dataset: Dataset) -> str | None:
    """A warning when a library holds fewer documents than the dataset: a judged document it
    lacks cannot be found, so its scores are not the dataset's."""
    if held >= len(dataset.corpus):
        return None
    return (
        f"library {library!r} holds {held} documents of the dataset's {len(dataset.corpus)}: "
        "the judged documents it lacks count as misses, so these scores are lower than "
        "retrieval over the whole dataset (leave out --library to ingest it)"
    )


async def count_no_match(kb: KbClient, library: str, questions: list[str]) -> int:
    """How many off-topic questions get ``no_match`` from a default search of the library (a
    question that fails counts as not answered no_match)."""

    async def one(question: str) -> bool:
        try:
            reply = await paced(kb, question, libraries=[library], rerank=False, timeout_s=300)
        except (KbError, ValueError, TimeoutError):
            return False
        return reply.no_match

    return sum(await asyncio.gather(*(one(q) for q in questions)))


async def evaluate_dataset(
    kb: KbClient,
    data: Dataset,
    split: str,
    modes: list[Mode],
    exclude_self: bool,
    progress: Progress,
    recorder: Recorder,
    library: str | None = None,
    off_topic: list[str] | None = None,
    keep: bool = False,
) -> EvalResult:
    """Ingest (unless the library is given and already indexed) and score every mode, saving
    the scores after each; a library it ingested is deleted at the end unless ``keep``."""
    if library is not None:
        result = _result(data, split, library)
        warning = short_of(library, await require_documents(kb, library), data)
        result.warnings += [warning] if warning else []
        return await _score(kb, data, modes, exclude_self, progress, recorder, result, off_topic)
    result = _result(data, split, f"{data.name}-{uuid.uuid4().hex[:8]}".lower())
    try:
        result.ingest_seconds, result.rejected = await ingest(kb, data, result.library, progress)
        recorder.save(result)
        return await _score(kb, data, modes, exclude_self, progress, recorder, result, off_topic)
    finally:
        if not keep:
            await kb.delete_document(library=result.library, wait=True, timeout_s=600)


def _result(data: Dataset, split: str, library: str) -> EvalResult:
    return EvalResult(
        data.name, split, library, len(data.corpus), len(data.qrels), 0.0, style=data.style
    )


async def _score(
    kb: KbClient,
    data: Dataset,
    modes: list[Mode],
    exclude_self: bool,
    progress: Progress,
    recorder: Recorder,
    result: EvalResult,
    off_topic: list[str] | None,
) -> EvalResult:
    """Every mode scored over the result's library, saved after each."""
    library = result.library
    for mode in modes:
        run = await run_mode(kb, data, library, mode, exclude_self, progress, recorder)
        result.modes[mode.label] = evaluate(run.ranked, data.qrels)
        result.query_seconds[mode.label] = run.seconds
        result.no_match[mode.label] = run.no_match
        result.errors[mode.label] = run.errors
        recorder.save(result)
    if off_topic:
        result.off_topic_questions = len(off_topic)
        result.off_topic_no_match = await count_no_match(kb, library, off_topic)
        recorder.save(result)
    return result


def expand(
    names: list[str],
    alphas: list[float] | None,
    rerank_depth: int | None,
    min_similarity: float | None = None,
    min_evidence: float | None = None,
) -> list[Mode]:
    """The modes to run: each name once, the hybrid ones once per alpha when alphas are given."""
    out: list[Mode] = []
    for name in names:
        hybrid = MODES[name]["search_type"] == "hybrid"
        depth = rerank_depth if MODES[name]["rerank"] else None
        choices: list[float | None] = list(alphas) if hybrid and alphas else [None]
        out.extend(Mode(name, alpha, depth, min_similarity, min_evidence) for alpha in choices)
    return out


def markdown(result: EvalResult) -> str:
    """The results as a Markdown table."""
    style = "" if result.style == "question" else f", {result.style} queries"
    lines = [
        f"**{result.dataset}** ({result.split}{style}: {result.queries} queries, "
        f"{result.documents} documents; ingestion {result.ingest_seconds:.0f} s)",
        "",
        "| mode | nDCG@10 | Recall@10 | Recall@100 | MRR@10 | no_match | errors | query time (s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for mode, scores in result.modes.items():
        lines.append(
            f"| {mode} | {scores['ndcg@10']:.4f} | {scores['recall@10']:.4f} | "
            f"{scores['recall@100']:.4f} | {scores['mrr@10']:.4f} | "
            f"{result.no_match.get(mode, 0)} | {len(result.errors.get(mode, {}))} | "
            f"{result.query_seconds[mode]:.0f} |"
        )
    failed = {f"{m}: {q}": why for m, errs in result.errors.items() for q, why in errs.items()}
    if failed:
        lines += ["", "Failed queries (each scored 0):", ""]
        lines += [f"- {where}: {why}" for where, why in list(failed.items())[:20]]
        if len(failed) > 20:
            lines.append(f"- and {len(failed) - 20} more (results.json)")
    if result.off_topic_questions:
        lines += [
            "",
            f"Off-topic queries answered no_match: {result.off_topic_no_match} of "
            f"{result.off_topic_questions}.",
        ]
    lines += [f"\n**Warning:** {warning}." for warning in result.warnings]
    return "\n".join(lines) + "\n"
