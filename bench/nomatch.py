"""``python -m bench.nomatch``: the evidence a ``no_match`` decision can use, per query style.

Against a library that holds a BEIR corpus (``kbus eval`` made it), every query of a split is
searched in each style (the split's questions, titles, keywords, paragraphs: kbus_cli.styles),
together with the off-topic set of each style (the split's half of it), with the floor off and
no rerank. For each query it records what the searcher sees: the candidates' cosines and BM25
scores, the query's analysed terms and how many of them the best candidates' keyword text
holds, and where the relevant document ranks. ``--analyze`` reads such a file and prints how
decision rules would do: the share of in-domain queries answered no_match and the share of
off-topic ones, per style.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kbus_cli.evaluation import Dataset
from kbus_cli.styles import OFF_TOPIC, STYLES, held_out, make_queries
from kbus_client import KbClient, KbError
from kbus_runtime.analysis import content_terms
from kbus_runtime.settings import StoreSettings
from kbus_runtime.store import weaviate_client
from kbus_searcher.search.relevance import keyword_coverage

DEPTH = 20
OFF_TOPIC_DIR = Path("tests/data")


def _lines(path: Path) -> list[str]:
    return [
        line.strip()
        for line in path.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]


async def _keywords(client: Any, collection: str, tenant: str, ids: list[str]) -> dict[str, str]:
    handle = client.collections.use(collection).with_tenant(tenant)
    found = {}
    for chunk_id in ids:
        obj = await handle.query.fetch_object_by_id(chunk_id, return_properties=["keywords"])
        if obj is not None:
            found[chunk_id] = str(obj.properties.get("keywords") or "")
    return found


async def _one(
    kb: KbClient, weaviate: Any, collection: str, library: str, query: str
) -> dict[str, Any]:
    try:
        reply = await kb.search(
            query, libraries=[library], k=DEPTH, rerank=False, min_similarity=-1, timeout_s=120
        )
    except (KbError, ValueError) as exc:
        return {"error": str(exc)}
    hits = reply.results
    scored = [h for h in hits if h.scores.keyword is not None]
    wordy = sorted(scored, key=lambda h: -(h.scores.keyword or 0.0))[:3] if scored else hits[:3]
    keywords = await _keywords(weaviate, collection, kb.tenant or "", [h.chunk_id for h in wordy])
    return {
        "terms": len(content_terms(query)),
        "cos": [h.scores.vector for h in hits],
        "bm25": [h.scores.keyword for h in hits],
        "docs": [h.document_id for h in hits],
        "coverage": keyword_coverage(query, [keywords.get(h.chunk_id, "") for h in wordy]),
        "baseline": reply.baseline_similarity,
    }


async def collect(args: argparse.Namespace) -> None:
    data = Dataset.load(args.dataset, args.split)
    corpus = {d["_id"]: d for d in data.corpus}
    weaviate = weaviate_client(StoreSettings(collection=args.collection))
    await weaviate.connect()
    alias = await weaviate.alias.get(alias_name=args.collection)
    collection = alias.collection if alias else args.collection
    kb = await KbClient.connect(args.nats_url, tenant=args.tenant)
    limit = asyncio.Semaphore(4)
    rows: list[dict[str, Any]] = []

    async def run(style: str, kind: str, qid: str, query: str, relevant: set[str]) -> None:
        async with limit:
            row = await _one(kb, weaviate, collection, args.library, query)
        row.update(style=style, kind=kind, qid=qid, relevant=sorted(relevant), chars=len(query))
        rows.append(row)

    jobs = []
    for style in STYLES[:4]:
        if style == "question":
            queries, qrels = {q: data.queries[q] for q in data.qrels}, data.qrels
        else:
            queries, qrels, _ = make_queries(style, corpus, data.qrels)
        for qid, text in list(queries.items())[: args.max_queries]:
            relevant = {d for d, g in qrels[qid].items() if g > 0}
            jobs.append(run(style, "in", qid, text, relevant))
        for n, text in enumerate(held_out(_lines(OFF_TOPIC_DIR / OFF_TOPIC[style]), args.split)):
            jobs.append(run(style, "off", f"off-{n}", text, set()))
    try:
        await asyncio.gather(*jobs)
    finally:
        await kb.close()
        await weaviate.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {len(rows)} rows to {args.out}")


# -- analysis ---------------------------------------------------------------------------------

Rule = Callable[[dict[str, Any]], bool]  # True: answer no_match


def features(row: dict[str, Any]) -> dict[str, float]:
    cos = [c for c in row.get("cos", []) if c is not None]
    bm25 = [b for b in row.get("bm25", []) if b is not None]
    terms = max(1, row.get("terms", 1))
    return {
        "best_cos": max(cos, default=0.0),
        "gap": (max(cos) - statistics.mean(cos[:10])) if cos else 0.0,
        "best_bm25": max(bm25, default=0.0),
        "bm25_per_term": max(bm25, default=0.0) / terms,
        "coverage": float(row.get("coverage", 0.0)),
        "terms": float(terms),
    }


def rates(rows: Iterable[dict[str, Any]], rule: Rule) -> dict[str, tuple[float, float]]:
    """Per style: (share of in-domain answered no_match, share of off-topic answered no_match)."""
    out = {}
    grouped: dict[str, dict[str, list[bool]]] = {}
    for row in rows:
        if "error" in row:
            continue
        grouped.setdefault(row["style"], {}).setdefault(row["kind"], []).append(rule(row))
    for style, kinds in grouped.items():
        inside, off = kinds.get("in", []), kinds.get("off", [])
        out[style] = (sum(inside) / max(1, len(inside)), sum(off) / max(1, len(off)))
    return out


def analyze(path: Path) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        if "error" not in row:
            row["f"] = features(row)
    print(f"{len(rows)} rows, {sum('error' in r for r in rows)} errors")
    for style in STYLES[:4]:
        for kind in ("in", "off"):
            values = [
                r["f"] for r in rows if r["style"] == style and r["kind"] == kind and "f" in r
            ]
            if not values:
                continue
            summary = "  ".join(
                f"{name} {_quantiles([v[name] for v in values])}"
                for name in ("best_cos", "bm25_per_term", "coverage", "gap")
            )
            print(f"{style:9} {kind:3} n={len(values):4}  {summary}")


def _quantiles(values: list[float]) -> str:
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return f"[{at(0.0):.2f} {at(0.02):.2f} {at(0.1):.2f} {at(0.5):.2f} {at(0.9):.2f} {at(1.0):.2f}]"


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.nomatch", description=__doc__)
    p.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    p.add_argument("--split", default="train")
    p.add_argument("--library", help="the indexed library (kbus eval's)")
    p.add_argument("--tenant", default="eval")
    p.add_argument("--collection", default="KbusChunks", help="the Weaviate alias")
    p.add_argument("--nats-url", default="nats://127.0.0.1:4222")
    p.add_argument("--max-queries", type=int, default=None)
    p.add_argument("--out", type=Path, default=Path("nomatch/train.jsonl"))
    p.add_argument("--analyze", type=Path, help="print the features of a collected file")
    args = p.parse_args()
    if args.analyze:
        analyze(args.analyze)
    else:
        asyncio.run(collect(args))


if __name__ == "__main__":
    main()
