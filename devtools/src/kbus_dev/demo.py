"""The demo: publish the sample documents, wait until they are searchable, ask two questions."""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path
from typing import Any

from kbus_client import DEFAULT_URL, CredentialFile, KbClient

from kbus_dev import stack

TENANT = stack.TENANT
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


async def run(nats_url: str, examples: Path, credential: CredentialFile | None) -> None:
    """As the tenant's client does: with its credential on a locked stack (``make demo``),
    without one on an open bus."""
    opened = await KbClient.connect(nats_url, tenant=TENANT, acts_for=None, credential=credential)
    async with opened as kb:
        docs = example_documents(examples)
        print(f"publishing {len(docs)} documents from {examples}/; waiting until searchable ...")
        published = await asyncio.gather(
            *(
                kb.publish_document(**{k: v for k, v in d.items() if k != "tenant"}, wait=True)
                for d in docs
            )
        )
        receipts = [p.receipt for p in published if p.receipt is not None]
        unchanged = f" ({len(docs) - len(receipts)} unchanged since the last run)"
        print(
            f"indexed {len(receipts)} documents as {sum(r.chunk_count for r in receipts)} chunks"
            + (unchanged if len(receipts) < len(docs) else "")
        )
        for question in QUESTIONS:
            reply = await kb.search(question, libraries=[LIBRARY], k=5)
            print_reply(question, reply.model_dump(mode="json"))


def main(nats_url: str, examples: Path, credential: Path | None = None) -> None:
    asyncio.run(run(nats_url, examples, CredentialFile.read(credential) if credential else None))


def try_it(nats_url: str, credential: Path | None, console_url: str | None = None) -> str:
    """What to type next, working as printed: the same search over HTTP where the console runs
    (a token made from the credential), then, last, the CLI holding the demo tenant's
    credential (it names the tenant), or naming the tenant on an open bus; the bus's address
    when it is not the one the CLI reaches by default."""
    search = f"search 'how do I install on Linux' --library {LIBRARY}"
    where = [] if nats_url == DEFAULT_URL else [f"KBUS_NATS_URL={shlex.quote(nats_url)}"]
    if credential is None:
        command = " ".join([*where, f"uv run kbus {search} --tenant {TENANT}"])
    else:
        held = f"KBUS_CREDENTIAL={shlex.quote(str(credential))}"
        command = " ".join([held, *where, f"uv run kbus {search}"])
    over_http = ""
    if console_url and credential is not None:
        held = f"KBUS_CREDENTIAL={shlex.quote(str(credential))}"
        body = json.dumps({"query": "how do I install on Linux", "libraries": [LIBRARY]})
        over_http = (
            f"\nOver HTTP (the console at {console_url}, its API in {console_url}/openapi.json;"
            f" a token is the credential):\n  TOKEN=$({held} uv run kbus token)\n"
            f'  curl -s -H "Authorization: Bearer $TOKEN" -H "content-type: application/json" '
            f"-d {shlex.quote(body)} {console_url}/v1/search\n"
        )
    return (
        f"\nkbus keeps running; `make stop` stops it.{over_http}\nTry it yourself: the demo's "
        f"tenant is {TENANT!r} and its library {LIBRARY!r}:\n  {command}"
    )
