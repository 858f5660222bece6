"""The demo: publish the sample documents, wait until they are searchable, ask two questions."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kbus_contract.topology import Topology

from kbus_dev.busclient import Receipts, connect, publish_documents, search

TENANT = "demo"
LIBRARY = "handbook"
QUESTIONS = (
    "How do I get the server running on a systemd machine?",
    "what does WX-4471 mean",
)


def example_documents(folder: Path) -> list[dict[str, Any]]:
    """Every .md and .txt file of a folder as a ``document.added`` message."""
    docs = []
    for path in sorted(folder.iterdir()):
        if path.suffix not in {".md", ".txt"}:
            continue
        text = path.read_text(encoding="utf-8")
        title = text.lstrip("# ").splitlines()[0].strip() if text.strip() else path.stem
        docs.append(
            {
                "tenant": TENANT,
                "library": LIBRARY,
                "document_id": path.name,
                "title": title,
                "text": text,
                "source_uri": f"examples/{path.name}",
                "content_type": "text/markdown" if path.suffix == ".md" else "text/plain",
                "metadata": {"kind": "example"},
            }
        )
    return docs


def print_reply(question: str, reply: dict[str, Any]) -> None:
    print(f"\nQ: {question}")
    if reply.get("kind") == "error":
        print(f"   error: {reply['error']}")
        return
    timings = reply["timings"]
    print(
        f"   {len(reply['results'])} results, scores: {reply['score_kind']} "
        f"(reranker {reply['reranker'] or 'none'}), {timings['total_ms']:.0f} ms "
        f"(embed {timings['embed_ms']:.0f}, search {timings['search_ms']:.0f}, "
        f"rerank {timings['rerank_ms']:.0f})"
    )
    for rank, hit in enumerate(reply["results"], 1):
        s = hit["scores"]
        where = " > ".join(hit["heading_path"]) or "-"
        fused = f"{s['fused']:.3f}" if s["fused"] is not None else "-"
        print(
            f"   {rank}. {s['final']:.3f} (fused {fused})  {hit['title']}  [{where}]  "
            f"{hit['source_uri']}"
        )
        snippet = " ".join(hit["text"].split())[:110]
        print(f"      {snippet}")


async def run(nats_url: str, examples: Path) -> None:
    topology = Topology()
    nc = await connect(nats_url)
    try:
        docs = example_documents(examples)
        receipts = Receipts()
        await receipts.subscribe(nc, topology)
        await publish_documents(nc, topology, docs)
        print(
            f"published {len(docs)} documents from {examples}/; waiting until searchable ...",
            flush=True,
        )
        await receipts.wait_for([(TENANT, LIBRARY, d["document_id"]) for d in docs], 300)
        chunks = sum(r["chunk_count"] for r in receipts.indexed.values())
        print(f"indexed {len(docs)} documents as {chunks} chunks")
        for question in QUESTIONS:
            reply = await search(
                nc,
                topology,
                {
                    "tenant": TENANT,
                    "libraries": [LIBRARY],
                    "query": question,
                    "k": 5,
                },
            )
            print_reply(question, reply)
    finally:
        await nc.close()


def main(nats_url: str, examples: Path) -> None:
    asyncio.run(run(nats_url, examples))
