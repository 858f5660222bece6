"""Large documents against many small ones, side by side in one run.

    python -m bench.large [--sizes 5,20,50] [--pdf-pages 300] [--small 600]

One stack, the embedding cache off (every chunk is embedded). First ``--small`` SciFact
abstracts, each its own document, published 64 at a time: the pipeline's rate on small
documents. Then each large document alone: a text of each ``--sizes`` megabytes (SciFact
abstracts one after another, each copy's sentences in another order) and a PDF of
``--pdf-pages`` pages. For each: chunks per second from publish to searchable against the
small documents' rate (goal at least 0.8), seconds until the first chunks were indexed (a
progress event) and until the document was searchable (a version becomes searchable whole),
and the ingestor's peak resident memory above what it held before (goal at most twice the
file's size; the parse workers of a PDF are processes of their own, not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from pathlib import Path
from typing import Any

from kbus_client import KbClient
from kbus_contract import ContentType
from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.profiling import Cutter

from bench.corpus import Corpus, as_added
from bench.pipeline import ingest, memory_kb
from bench.report import save
from bench.stack import BenchStack, bench_stack
from tests import samples
from tests.cutting import chunk_document

TENANT, SMALL, LARGE = "bench", "small", "large"
MiB = 1024**2


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.large", description=__doc__)
    p.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    p.add_argument("--sizes", default="5,20,50", help="Text sizes in MB, comma-separated.")
    p.add_argument("--pdf-pages", type=int, default=300)
    p.add_argument("--small", type=int, default=600, help="Small documents for the baseline.")
    p.add_argument("--out", type=Path, default=Path("bench-results/large.json"))
    return p.parse_args(argv)


def _abstracts(dataset: Path) -> list[dict[str, str]]:
    with (dataset / "corpus.jsonl").open() as handle:
        return [json.loads(line) for line in handle if line.strip()]


def large_text(abstracts: list[dict[str, str]], megabytes: float) -> str:
    """Abstracts one after another up to ``megabytes``; each copy of an abstract past the
    first has its sentences in another order, so no chunk repeats another."""
    rng, parts, size, copy = random.Random(megabytes), [], 0, 0
    while size < megabytes * MiB:
        for doc in abstracts:
            sentences = doc["text"].split(". ")
            if copy:
                rng.shuffle(sentences)
            block = f"{doc['title']}\n\n{'. '.join(sentences)}\n\n"
            parts.append(block)
            size += len(block.encode())
            if size >= megabytes * MiB:
                break
        copy += 1
    return "".join(parts)


async def _small_rate(kb: KbClient, abstracts: list[dict[str, str]], n: int) -> dict[str, Any]:
    """The pipeline's rate on ``n`` abstracts, each its own document."""
    docs = abstracts[:n]
    cutter = Cutter.recursive(ChunkingConfig())
    chunked = [chunk_document(as_added(d, TENANT, SMALL), cutter, 10_000) for d in docs]
    return await ingest(kb, Corpus(docs, chunked, []), SMALL)


async def _one_large(
    kb: KbClient, stack: BenchStack, name: str, content: dict[str, Any], size: int
) -> dict[str, Any]:
    """Publish one large document and follow it until it is searchable."""
    ingestor = stack.services["ingestor"]
    before = memory_kb(ingestor)["rss_kb"]
    first: float | None = None
    chunks = 0
    started = time.perf_counter()
    async with kb.progress_of(LARGE) as progress:

        async def follow() -> None:
            nonlocal first, chunks
            while True:
                told = await progress.get()
                if told.document_id == name:
                    first = first or time.perf_counter() - started
                    chunks = max(chunks, told.total)

        watcher = asyncio.create_task(follow())
        try:
            published = await kb.publish_document(
                library=LARGE,
                document_id=name,
                title=name,
                wait=True,
                timeout_s=4 * 3600,
                **content,
            )
        finally:
            watcher.cancel()
    seconds = time.perf_counter() - started
    peak = memory_kb(ingestor)["peak_kb"]
    if published.receipt is not None:
        chunks = published.receipt.chunk_count
    # A document of one part is indexed at once: no progress is told before its receipt.
    first = seconds if first is None else first
    return {
        "document": name,
        "file_mb": round(size / MiB, 2),
        "chunks": chunks,
        "seconds": round(seconds, 1),
        "chunks_per_s": round(chunks / seconds, 1) if chunks else None,
        "first_indexed_s": round(first, 1),
        "searchable_s": round(seconds, 1),
        "ingestor_rss_before_mb": round(before / 1024, 1),
        "ingestor_peak_growth_mb": round(max(0, peak - before) / 1024, 1),
        "peak_growth_per_file_size": round(max(0, peak - before) * 1024 / size, 2),
    }


async def _run(args: argparse.Namespace, stack: BenchStack) -> dict[str, Any]:
    abstracts = _abstracts(args.dataset)
    async with await KbClient.connect(stack.nats_url, prefix=stack.prefix, tenant=TENANT) as kb:
        small = await _small_rate(kb, abstracts, args.small)
        print(f"small documents: {small['chunks_per_s']:.1f} chunks/s", flush=True)
        large = []
        if args.pdf_pages:
            pages = [f"{d['title']}\n{d['text']}" for d in abstracts[: args.pdf_pages]]
            data = samples.pdf([p.encode("latin-1", "replace").decode("latin-1") for p in pages])
            content = {"data": data, "content_type": ContentType.PDF.value}
            large.append(await _one_large(kb, stack, f"pdf-{args.pdf_pages}p", content, len(data)))
            print(large[-1], flush=True)
        for megabytes in (float(m) for m in args.sizes.split(",") if m):
            text = large_text(abstracts, megabytes)
            size = len(text.encode())
            large.append(await _one_large(kb, stack, f"text-{megabytes:g}mb", {"text": text}, size))
            del text
            print(large[-1], flush=True)
    for row in large:
        rate = row["chunks_per_s"]
        row["rate_vs_small"] = round(rate / small["chunks_per_s"], 2) if rate else None
    return {
        "small": small,
        "large": large,
        "goals": {
            "rate_at_least_0_8_of_small": all((r["rate_vs_small"] or 0) >= 0.8 for r in large),
            "peak_at_most_twice_the_file": all(
                r["peak_growth_per_file_size"] <= 2
                for r in large
                if r["document"].startswith("text")
            ),
        },
    }


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    settings = {"KBUS_EMBEDDER_CACHE": "false"}
    with bench_stack("large", settings) as stack:
        result = asyncio.run(_run(args, stack))
    save(args.out, result)
    print(json.dumps(result["goals"]))
    return 0 if all(result["goals"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
