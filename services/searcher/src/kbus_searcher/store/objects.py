"""What a publish of a document becomes in Weaviate: an object per chunk (and per matching
text), with its properties and vectors, under its deterministic id."""

from __future__ import annotations

import json
import uuid
from typing import Any

import numpy as np
from kbus_contract import EmbeddedChunk, EmbeddingsReady
from kbus_contract.base import Metadata
from kbus_runtime.analysis import keyword_text
from weaviate.classes.data import DataObject

from kbus_searcher.store import filters
from kbus_searcher.store.schema import CHUNK_VECTOR, DOCUMENT_VECTOR


def document_vector(ready: EmbeddingsReady) -> list[float]:
    """The normalised mean of the chunk vectors of a message (all of a document's, unless it
    travels in parts); a chunk whose vector is not of the stated dimension is left out (the
    store refuses that chunk itself)."""
    vectors = [c.vector for c in ready.chunks if len(c.vector) == ready.dimension]
    if not vectors:
        return [0.0] * ready.dimension
    mean = np.asarray(vectors, dtype=np.float32).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return (mean / norm if norm > 0 else mean).tolist()  # type: ignore[no-any-return]


def objects_of(ready: EmbeddingsReady) -> list[DataObject[dict[str, Any], None]]:
    doc = ready.document
    whole = document_vector(ready)
    base = {
        "title": doc.title,
        "library": doc.library,
        "document_id": doc.document_id,
        "version": doc.version,
        "sequence": doc.sequence,
        "model": ready.model,
        "source_uri": doc.source_uri,
        "source": doc.source,
        "access": list(doc.access),
    }
    objects = []
    for chunk in ready.chunks:
        properties = {
            **base,
            "text": chunk.text,
            "keywords": chunk.keywords,
            "heading_path": list(chunk.heading_path),
            "heading_text": " > ".join(chunk.heading_path),
            "position": chunk.position,
            "char_start": chunk.char_start,
            "char_end": chunk.char_end,
            "page": chunk.page or 0,
            "match": 0,
            "matched": "",
            **_metadata({**doc.metadata, **chunk.metadata}),
        }
        objects.append(
            DataObject(
                uuid=uuid.UUID(chunk.chunk_id),
                vector={CHUNK_VECTOR: list(chunk.vector), DOCUMENT_VECTOR: whole},
                properties=properties,
            )
        )
        objects.extend(_matching_objects(doc.title, chunk, properties, whole))
    return objects


def _matching_objects(
    title: str, chunk: EmbeddedChunk, properties: dict[str, Any], whole: list[float]
) -> list[DataObject[dict[str, Any], None]]:
    """One object per matching text: found by that text's vector and words, showing the chunk."""
    return [
        DataObject(
            uuid=matching_id(chunk.chunk_id, i),
            vector={CHUNK_VECTOR: list(vector), DOCUMENT_VECTOR: whole},
            properties={
                **properties,
                "keywords": keyword_text(title, chunk.heading_path, text),
                "match": i,
                "matched": text,
            },
        )
        for i, (text, vector) in enumerate(
            zip(chunk.matching, chunk.matching_vectors, strict=True), 1
        )
    ]


def matching_id(chunk_id: str, match: int) -> uuid.UUID:
    """The id of a chunk's ``match``-th matching text (deterministic: a redelivery overwrites)."""
    return uuid.uuid5(uuid.UUID(chunk_id), f"match-{match}")


def _metadata(metadata: Metadata) -> dict[str, Any]:
    """A chunk's metadata (its document's, with its own over it), as stored and as filtered."""
    return {
        "metadata_json": json.dumps(metadata),
        "metadata_kv": filters.metadata_terms(metadata),
    }
