"""A whole document cut at once, as the tests and benches compare against: the ingestor itself
sends a document's chunks a message at a time (:mod:`kbus_ingestor.cutting`)."""

from __future__ import annotations

from kbus_contract import ChunksReady, DocumentAdded
from kbus_ingestor.cutting import Cutting
from kbus_ingestor.parsing import Parsed
from kbus_ingestor.profiling import Cutter


def chunk_document(
    doc: DocumentAdded,
    cutter: Cutter,
    max_chunks: int,
    sequence: int = 0,
    keyword_window: int = 1000,
    parsed: Parsed | None = None,
) -> ChunksReady:
    """Every chunk of a document (its text, or what its bytes were parsed into) at once.

    Raises:
        PermanentError: the document yields no chunk, or more than ``max_chunks``.
    """
    cutting = Cutting.of(doc, cutter, keyword_window, parsed)
    total = cutting.count(max_chunks)
    return ChunksReady(
        document=cutting.ref(sequence), total_chunks=total, chunks=tuple(cutting.chunks())
    )
