"""``python -m bench.matching``: content only against content plus generated questions.

Flexi-Match matches a query against questions generated from each chunk rather than (here:
besides) the chunk itself, and turns the query into a question too. This measures that on a
subset of a BEIR dataset (chosen by document: the judged documents of the first queries, then
others up to ``--max-documents``), against a running stack with the LLM server (``python -m
kbus_dev up --llm``):

1. Each document is cut as the ingestor's default chunker cuts it.
2. A chat model writes ``--questions`` questions per chunk, asked and read as the generator
   asks and reads them (kept in ``questions.json`` of the results folder, so a second run
   generates nothing); the rate is reported.
3. The same chunks are published twice as the publisher's own chunks: once alone, once with
   the questions as their matching texts.
4. Every query is searched in both libraries (hybrid, one reranked variant) as written and
   through the question transformer; nDCG@10 of the documents (a document at its best chunk).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from kbus_cli.evaluation import Dataset
from kbus_cli.metrics import ndcg_at
from kbus_client import KbClient
from kbus_contract import ContentType, DocumentAdded, Matching, MatchingKind
from kbus_generator.prompts import ask_for, questions
from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.profiling import Cutter
from kbus_runtime.chat import LLMSettings, OpenAIChat

from tests.cutting import chunk_document

#: Each search, as (label, request choices).
MODES: dict[str, dict[str, Any]] = {
    "hybrid": {"rerank": False, "rewrite": False},
    "hybrid + question transformer": {"rerank": False, "transformer": "question"},
    "hybrid + rerank": {"rerank": True, "rewrite": False},
}


def cut(doc: dict[str, str]) -> list[str]:
    """The document's chunks as the ingestor's default chunker makes them."""
    added = DocumentAdded(
        tenant="bench",
        library="x",
        document_id=doc["_id"],
        title=doc.get("title", ""),
        text=doc["text"] or doc.get("title", "") or "-",
        content_type=ContentType.PLAIN,
    )
    return [
        c.text for c in chunk_document(added, Cutter.recursive(ChunkingConfig()), 10_000).chunks
    ]


async def generate(
    chat: OpenAIChat, chunks: dict[str, list[str]], n: int, kept: Path
) -> tuple[dict[str, list[list[str]]], float, int]:
    """Questions per chunk (those kept from an earlier run are reused); the seconds and the
    number of chunks generated now."""
    done: dict[str, list[list[str]]] = await asyncio.to_thread(_read, kept)
    todo = [d for d in chunks if d not in done]
    started = time.perf_counter()
    made = 0
    for doc_id in todo:
        answers = []
        for text in chunks[doc_id]:
            ask = ask_for(Matching(kind=MatchingKind.QUESTIONS, count=n), text)
            raw = await chat.chat(ask.system, ask.message, max_tokens=ask.max_tokens)
            answers.append(list(questions(raw, n)))
            made += 1
        done[doc_id] = answers
        await asyncio.to_thread(kept.write_text, json.dumps(done))
    return done, time.perf_counter() - started, made


def _read(kept: Path) -> dict[str, list[list[str]]]:
    return json.loads(kept.read_text()) if kept.exists() else {}


async def publish(
    kb: KbClient, library: str, chunks: dict[str, list[str]], matching: Any, titles: dict[str, str]
) -> None:
    limit = asyncio.Semaphore(16)

    async def one(doc_id: str) -> None:
        async with limit:
            await kb.publish_document(
                library=library,
                document_id=doc_id,
                title=titles[doc_id],
                chunks=chunks[doc_id],
                matching=[tuple(q) for q in matching[doc_id]] if matching else None,
                wait=True,
                timeout_s=3_600,
            )

    await asyncio.gather(*(one(d) for d in chunks))


async def score(kb: KbClient, library: str, data: Dataset, choices: dict[str, Any]) -> float:
    limit = asyncio.Semaphore(4)
    values: list[float] = []

    async def one(qid: str) -> None:
        async with limit:
            reply = await kb.search(
                data.queries[qid],
                libraries=[library],
                k=100,
                group_by_document=True,
                min_evidence=-1,
                timeout_s=600,
                **choices,
            )
        ranked = [h.document_id for h in reply.results]
        values.append(ndcg_at(ranked, data.qrels[qid], 10))

    await asyncio.gather(*(one(q) for q in data.qrels))
    return float(np.mean(values))


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    data = Dataset.load(args.dataset, args.split, args.max_queries, args.max_documents)
    chunks = {d["_id"]: cut(d) for d in data.corpus}
    titles = {d["_id"]: d.get("title", "") for d in data.corpus}
    args.results.mkdir(parents=True, exist_ok=True)
    chat = OpenAIChat(LLMSettings(url=args.llm_url, timeout_s=600))
    questions, seconds, made = await generate(
        chat, chunks, args.questions, args.results / "questions.json"
    )
    await chat.close()
    kb = await KbClient.connect(args.nats_url, tenant="bench")
    tag = str(int(time.time()))
    scores: dict[str, dict[str, float]] = {}
    async with kb:
        await publish(kb, f"content-{tag}", chunks, None, titles)
        await publish(kb, f"questions-{tag}", chunks, questions, titles)
        for label, choices in MODES.items():
            scores[label] = {
                kind: await score(kb, f"{kind}-{tag}", data, choices)
                for kind in ("content", "questions")
            }
    all_chunks = sum(len(c) for c in chunks.values())
    return {
        "documents": len(chunks),
        "chunks": all_chunks,
        "queries": len(data.qrels),
        "chunks_with_questions": sum(bool(q) for qs in questions.values() for q in qs),
        "questions": sum(len(q) for qs in questions.values() for q in qs),
        "generated_now": made,
        "generation_seconds": round(seconds, 1),
        "chunks_per_second": round(made / seconds, 3) if made else None,
        "ndcg@10": scores,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--split", default="train")
    parser.add_argument("--max-queries", type=int, default=25)
    parser.add_argument("--max-documents", type=int, default=50)
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--nats-url", default="nats://127.0.0.1:4222")
    parser.add_argument("--llm-url", default=LLMSettings().url)
    parser.add_argument("--results", type=Path, default=Path("bench-results/matching"))
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    (args.results / "results.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
