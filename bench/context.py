"""``python -m bench.context``: answers within a token budget, on long documents, side by side.

From BEIR SciFact (read from ``--dataset``, never copied): documents of ``--group`` abstracts
each (a seeded shuffle), every abstract a Markdown section under its own title, so that the
relevant text sits inside long documents. One library is indexed once; then each query is asked
in every mode on it, in one run:

- ``none`` (the top chunks until the budget is full: what an agent got before), ``neighbours``,
  ``section`` and ``document``, at each budget, the budget alone deciding how many passages;
- at the middle budget, each expansion with a fixed ``k`` and with ``adaptive``.

For each mode: evidence recall at budget (the share of the relevant sections' text the
context's spans hold), the share of queries with at least one relevant section whole, nDCG@10 of
the sections in the order the passages' hits reach them, and the time the context took (the
reply's ``context_ms``) and the whole search (``total_ms``). Every reply's ``results`` are
compared with those of the same search without a budget: the ranking must not move.

Tune on ``--split train``; read ``test`` once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbus_cli.evaluation import Dataset
from kbus_cli.metrics import ndcg_at
from kbus_client import KbClient
from kbus_contract import Expand, SearchReply

from bench.report import save
from bench.stack import bench_stack

TENANT = "context"
LIBRARY = "long"


@dataclass(frozen=True)
class Section:
    """Where an abstract's text lies in its long document."""

    document: str
    start: int
    end: int


@dataclass(frozen=True)
class Corpus:
    documents: dict[str, str]  # id -> Markdown text
    sections: dict[str, Section]  # abstract id -> where its text lies
    by_document: dict[str, list[tuple[str, Section]]]  # the sections of each document


def build_corpus(data: Dataset, abstracts: int | None, group: int, seed: int) -> Corpus:
    """Long documents of ``group`` abstracts each: every relevant abstract of the queries, and
    others up to ``abstracts`` (all by default)."""
    rng = random.Random(seed)
    relevant = {d for judged in data.qrels.values() for d in judged}
    chosen = [d for d in data.corpus if d["_id"] in relevant]
    others = [d for d in data.corpus if d["_id"] not in relevant]
    rng.shuffle(others)
    room = len(others) if abstracts is None else max(0, abstracts - len(chosen))
    chosen += others[:room]
    rng.shuffle(chosen)
    documents: dict[str, str] = {}
    sections: dict[str, Section] = {}
    for n in range(0, len(chosen), group):
        doc_id = f"collection-{n // group:04d}"
        text = f"# Collection {n // group}\n\n"
        for abstract in chosen[n : n + group]:
            text += f"## {abstract.get('title') or abstract['_id']}\n\n"
            body = abstract["text"].strip() or "-"
            sections[abstract["_id"]] = Section(doc_id, len(text), len(text) + len(body))
            text += body + "\n\n"
        documents[doc_id] = text.rstrip() + "\n"
    by_document: dict[str, list[tuple[str, Section]]] = {}
    for sid, sec in sections.items():
        by_document.setdefault(sec.document, []).append((sid, sec))
    return Corpus(documents, sections, by_document)


@dataclass(frozen=True)
class Mode:
    budget: int
    expand: Expand
    k: int | None = None
    adaptive: bool = False

    @property
    def label(self) -> str:
        how = "adaptive" if self.adaptive else (f"k={self.k}" if self.k else "budget")
        return f"{self.budget} {self.expand.value} {how}"


def modes(budgets: list[int], fixed_k: int) -> list[Mode]:
    """Every expansion at every budget; at the middle budget, fixed k and adaptive too."""
    out = [Mode(b, e) for b in budgets for e in Expand]
    middle = budgets[len(budgets) // 2]
    out += [Mode(middle, e, k=fixed_k) for e in Expand]
    out += [Mode(middle, e, adaptive=True) for e in Expand]
    return out


@dataclass
class Scores:
    recall: list[float] = field(default_factory=list)
    whole: list[float] = field(default_factory=list)
    ndcg: list[float] = field(default_factory=list)
    context_ms: list[float] = field(default_factory=list)
    total_ms: list[float] = field(default_factory=list)
    tokens: list[float] = field(default_factory=list)
    passages: list[float] = field(default_factory=list)
    moved: int = 0


def judge(reply: SearchReply, corpus: Corpus, judged: dict[str, int]) -> tuple[float, bool, float]:
    """(evidence recall, a relevant section whole, section nDCG@10) of one context."""
    spans: dict[str, list[tuple[int, int]]] = {}
    order: list[str] = []
    for passage in reply.context.passages if reply.context else ():
        doc = passage.citation.document_id
        spans.setdefault(doc, []).extend((s.char_start, s.char_end) for s in passage.citation.spans)
        for hit in passage.hits:
            for sid, sec in corpus.by_document.get(doc, []):
                if sec.start <= hit.char_start < sec.end + 2 and sid not in order:
                    order.append(sid)
    relevant = [corpus.sections[r] for r, g in judged.items() if g > 0 and r in corpus.sections]
    held = [
        sum(max(0, min(b, sec.end) - max(a, sec.start)) for a, b in spans.get(sec.document, []))
        for sec in relevant
    ]
    total = sum(sec.end - sec.start for sec in relevant)
    recall = sum(held) / total if total else 0.0
    whole = any(h >= 0.99 * (sec.end - sec.start) for h, sec in zip(held, relevant, strict=True))
    return recall, whole, ndcg_at(order, judged, 10)


async def _index(kb: KbClient, corpus: Corpus, concurrency: int = 16) -> float:
    limit = asyncio.Semaphore(concurrency)

    async def one(doc_id: str, text: str) -> None:
        async with limit:
            await kb.publish_document(
                library=LIBRARY,
                document_id=doc_id,
                title=doc_id,
                text=text,
                content_type="text/markdown",
                wait=True,
                timeout_s=3_600,
            )

    started = time.perf_counter()
    await asyncio.gather(*(one(d, t) for d, t in corpus.documents.items()))
    return time.perf_counter() - started


async def _ask(kb: KbClient, query: str, mode: Mode | None) -> SearchReply:
    if mode is None:
        return await kb.search(query, libraries=[LIBRARY], timeout_s=30)
    return await kb.search(
        query,
        libraries=[LIBRARY],
        k=mode.k,
        budget_tokens=mode.budget,
        expand=mode.expand,
        adaptive=mode.adaptive,
        timeout_s=30,
    )


async def measure(
    kb: KbClient, data: Dataset, corpus: Corpus, runs: list[Mode]
) -> dict[str, Scores]:
    """Every mode for every query, the modes of one query one after another."""
    scores = {m.label: Scores() for m in runs}
    judged = [(qid, data.queries[qid]) for qid in sorted(data.qrels)]
    for n, (qid, query) in enumerate(judged):
        base = [h.chunk_id for h in (await _ask(kb, query, None)).results]
        for mode in runs:
            reply = await _ask(kb, query, mode)
            s = scores[mode.label]
            recall, whole, ndcg = judge(reply, corpus, data.qrels.get(qid, {}))
            s.recall.append(recall)
            s.whole.append(float(whole))
            s.ndcg.append(ndcg)
            s.context_ms.append(reply.timings.context_ms)
            s.total_ms.append(reply.timings.total_ms)
            context = reply.context
            s.tokens.append(context.used_tokens if context else 0)
            s.passages.append(len(context.passages) if context else 0)
            s.moved += [h.chunk_id for h in reply.results] != base[: len(reply.results)]
        if n % 20 == 0:
            print(f"query {n + 1}/{len(judged)}", flush=True)
    return scores


def summary(scores: dict[str, Scores]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for label, s in scores.items():
        rows.append(
            {
                "mode": label,
                "evidence_recall": round(statistics.fmean(s.recall), 4),
                "whole_section": round(statistics.fmean(s.whole), 4),
                "section_ndcg10": round(statistics.fmean(s.ndcg), 4),
                "tokens": round(statistics.fmean(s.tokens), 1),
                "passages": round(statistics.fmean(s.passages), 2),
                "context_ms_p50": round(statistics.median(s.context_ms), 1),
                "total_ms_p50": round(statistics.median(s.total_ms), 1),
                "results_moved": s.moved,
            }
        )
    base = {r["mode"].split()[0]: r["evidence_recall"] for r in rows if "none budget" in r["mode"]}
    for r in rows:
        budget = r["mode"].split()[0]
        r["recall_vs_none"] = round(r["evidence_recall"] / base[budget], 3) if base[budget] else 0
    return rows


def markdown(rows: list[dict[str, Any]], about: dict[str, Any]) -> str:
    head = (
        "| mode (budget, expand, passages by) | evidence recall | vs none | whole section | "
        "section nDCG@10 | tokens | passages | context ms p50 | search ms p50 |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )
    body = "".join(
        f"| {r['mode']} | {r['evidence_recall']:.3f} | {r['recall_vs_none']:.2f} | "
        f"{r['whole_section']:.3f} | {r['section_ndcg10']:.3f} | {r['tokens']:.0f} | "
        f"{r['passages']:.1f} | {r['context_ms_p50']:.1f} | {r['total_ms_p50']:.1f} |\n"
        for r in rows
    )
    moved = sum(r["results_moved"] for r in rows)
    return head + body + f"\n{json.dumps(about)}; results moved by a budget: {moved}\n"


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.context", description=__doc__)
    p.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    p.add_argument("--split", default="train", help="train to tune; test once")
    p.add_argument("--queries", type=int, default=None, help="the first N judged queries")
    p.add_argument("--abstracts", type=int, default=None, help="abstracts indexed (all)")
    p.add_argument("--group", type=int, default=10, help="abstracts per long document")
    p.add_argument("--budgets", default="512,1024,2048")
    p.add_argument("--fixed-k", type=int, default=5)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", type=Path, default=Path("bench-results/context.json"))
    return p.parse_args()


async def run(args: argparse.Namespace) -> str:
    """One NATS, one Weaviate and the services started for the run; the table."""
    data = Dataset.load(args.dataset, args.split, max_queries=args.queries)
    corpus = build_corpus(data, args.abstracts, args.group, args.seed)
    runs = modes([int(b) for b in args.budgets.split(",")], args.fixed_k)
    settings = dict(item.partition("=")[::2] for item in args.set)
    with bench_stack("context", settings) as stack:
        async with await KbClient.connect(stack.nats_url, prefix=stack.prefix, tenant=TENANT) as kb:
            print(f"{len(corpus.documents)} documents, {len(data.qrels)} queries", flush=True)
            indexed_s = await _index(kb, corpus)
            scores = await measure(kb, data, corpus, runs)
    rows = summary(scores)
    about = {
        "split": args.split,
        "queries": len(data.qrels),
        "documents": len(corpus.documents),
        "abstracts": len(corpus.sections),
        "indexed_s": round(indexed_s, 1),
        "settings": args.set,
    }
    save(args.out, {"about": about, "rows": rows})
    return markdown(rows, about)


if __name__ == "__main__":
    print(asyncio.run(run(_args())))
