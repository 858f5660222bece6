"""The benchmark corpus: BEIR documents, and the exact chunk texts the pipeline embeds."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from kbus_contract import ChunksReady, DocumentAdded
from kbus_embedder.embedding import document_text
from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.profiling import Cutter

from tests.cutting import chunk_document


@dataclass(frozen=True)
class Corpus:
    """Documents, their chunks as the ingestor makes them, and queries."""

    documents: list[dict[str, str]]
    chunked: list[ChunksReady]
    queries: list[str]
    #: CPU seconds the ingestor's own chunking (with keyword analysis) took in-process.
    chunking_cpu_s: float = 0.0

    @property
    def chunk_texts(self) -> list[str]:
        """What the embedder embeds, chunk by chunk, in pipeline order."""
        return [
            document_text(ready.document, chunk, include_title=True)
            for ready in self.chunked
            for chunk in ready.chunks
        ]

    @property
    def chunks(self) -> int:
        return sum(len(r.chunks) for r in self.chunked)


def load(folder: Path, documents: int | None, queries: int) -> Corpus:
    """The first ``documents`` documents of a BEIR folder, and ``queries`` of its test queries."""
    docs = []
    with (folder / "corpus.jsonl").open() as handle:
        for line in handle:
            if line.strip():
                docs.append(json.loads(line))
            if documents and len(docs) >= documents:
                break
    judged = _test_query_ids(folder)
    texts = {}
    with (folder / "queries.jsonl").open() as handle:
        for line in handle:
            if line.strip():
                q = json.loads(line)
                texts[q["_id"]] = q["text"]
    chosen = [texts[q] for q in judged if q in texts][:queries]
    added = [as_added(d, "bench", "bench") for d in docs]
    cpu = time.process_time()
    chunked = [
        chunk_document(d, Cutter.recursive(ChunkingConfig()), max_chunks=10_000) for d in added
    ]
    return Corpus(docs, chunked, chosen, time.process_time() - cpu)


def as_added(doc: dict[str, str], tenant: str, library: str) -> DocumentAdded:
    """A BEIR document as a ``document.added`` message."""
    return DocumentAdded(
        tenant=tenant,
        library=library,
        document_id=doc["_id"],
        title=doc.get("title", ""),
        text=body(doc),
    )


def body(doc: dict[str, str]) -> str:
    """A BEIR document's text (its title where the text is empty: kbus refuses empty text)."""
    return doc["text"] if doc["text"].strip() else doc.get("title", "") or "-"


def _test_query_ids(folder: Path) -> list[str]:
    ids: list[str] = []
    with (folder / "qrels" / "test.tsv").open() as handle:
        next(handle)
        for line in handle:
            qid = line.split("\t", 1)[0]
            if not ids or ids[-1] != qid:
                ids.append(qid)
    return ids
