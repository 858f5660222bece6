"""``python -m bench.parsing``: what each format's parser keeps, and its time per megabyte.

Documents of each format are made with the formats' own libraries (tests/samples.py), about
``--megabytes`` each, from SciFact abstracts (sections with headings, a table, pages or slides),
and parsed in this process the way a parser worker does, three times each; the median is kept.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from kbus_contract import ContentType, DocumentAdded, RecordTemplate
from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.parsing import Limits, Parsed, parse
from kbus_ingestor.profiling import Cutter

from bench.report import save
from tests import samples
from tests.cutting import chunk_document

LIMITS = Limits(max_unpacked_bytes=2**31, max_records=10**6)
TEMPLATE = RecordTemplate(text="{title}: {text}", title="{title}", metadata=("id",))


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.parsing", description=__doc__)
    p.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    p.add_argument("--megabytes", type=float, default=1.0)
    p.add_argument("--out", type=Path, default=Path("bench-results/parsing.json"))
    return p.parse_args()


def _abstracts(dataset: Path, megabytes: float) -> list[dict[str, str]]:
    docs: list[dict[str, str]] = []
    size = 0
    for line in (dataset / "corpus.jsonl").open():
        doc = json.loads(line)
        docs.append({"id": doc["_id"], "title": doc["title"], "text": doc["text"]})
        size += len(doc["title"]) + len(doc["text"])
        if size > megabytes * 1024**2:
            return docs
    return docs


def _html(docs: list[dict[str, str]]) -> bytes:
    body = "".join(f"<h2>{d['title']}</h2><p>{d['text']}</p>" for d in docs)
    table = "<table><tr><th>id</th><th>title</th></tr>" + "".join(
        f"<tr><td>{d['id']}</td><td>{d['title']}</td></tr>" for d in docs[:50]
    )
    return (
        f"<html><body><nav>Home</nav><main><h1>Abstracts</h1>{body}{table}</table></main>".encode()
    )


def _documents(docs: list[dict[str, str]]) -> dict[ContentType, bytes]:
    return {
        ContentType.HTML: _html(docs),
        # The PDF's core font is Latin-1 only.
        ContentType.PDF: samples.pdf([_latin(d["title"] + "\n" + d["text"]) for d in docs]),
        ContentType.DOCX: samples.word(
            "Abstracts",
            {d["title"][:200]: d["text"] for d in docs},
            table=[["id", "title"]] + [[d["id"], d["title"]] for d in docs[:50]],
        ),
        ContentType.PPTX: samples.slides([(d["title"][:200], d["text"]) for d in docs]),
        ContentType.XLSX: samples.sheet(
            "Abstracts",
            [["id", "title", "text"]] + [[d["id"], d["title"], d["text"]] for d in docs],
        ),
        ContentType.JSON: json.dumps(docs).encode(),
    }


def _latin(text: str) -> str:
    return text.encode("latin-1", "replace").decode("latin-1")


def _kept(content_type: ContentType, parsed: Parsed) -> dict[str, Any]:
    doc = DocumentAdded(
        tenant="b",
        library="b",
        document_id="b",
        title="",
        text="x",
        content_type=ContentType.JSON if content_type.records else ContentType.PLAIN,
        template=TEMPLATE if content_type.records else None,
    )
    chunks = chunk_document(
        doc, Cutter.recursive(ChunkingConfig(512, 50)), 10**6, parsed=parsed
    ).chunks
    return {
        "chunks": len(chunks),
        "heading_paths": len({c.heading_path for c in chunks if c.heading_path}),
        "pages": len(parsed.pages),
        "table_rows": sum(line.startswith("|") for line in parsed.text.splitlines()),
        "records": len(parsed.records),
    }


def main() -> None:
    args = _args()
    rows = []
    docs = _abstracts(args.dataset, args.megabytes)
    for content_type, data in _documents(docs).items():
        template = TEMPLATE if content_type.records else None
        times = []
        for _ in range(3):
            started = time.perf_counter()
            parsed = parse(content_type, data, template, LIMITS)
            times.append(time.perf_counter() - started)
        seconds = statistics.median(times)
        mb = len(data) / 1024**2
        rows.append(
            {
                "format": content_type.value,
                "abstracts": len(docs),
                "megabytes": round(mb, 2),
                "seconds": round(seconds, 2),
                "seconds_per_mb": round(seconds / mb, 2),
                **_kept(content_type, parsed),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    save(args.out, rows)


if __name__ == "__main__":
    main()
