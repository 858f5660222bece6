"""Filters: a search's scope (its libraries and metadata), and a document's chunks.

Top-level metadata is stored as ``key=value`` terms (:func:`metadata_terms`) so that an equality
filter on any key is one ``contains_any`` on one property.
"""

from __future__ import annotations

import json
from typing import Any

from kbus_contract import MetadataScalar
from weaviate.classes.query import Filter
from weaviate.collections.classes.filters import _Filters

Filters = dict[str, MetadataScalar | tuple[MetadataScalar, ...]]


def metadata_terms(metadata: dict[str, Any]) -> list[str]:
    """``key=value`` terms for top-level scalar metadata (and each scalar of a list)."""
    terms: list[str] = []
    for key, value in metadata.items():
        values = value if isinstance(value, list) else [value]
        terms.extend(
            f"{key}={_scalar_term(v)}" for v in values if isinstance(v, str | int | float | bool)
        )
    return terms


def _scalar_term(value: MetadataScalar) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


def scope(
    libraries: tuple[str, ...], filters: Filters, exclude_documents: tuple[str, ...] = ()
) -> _Filters:
    """Chunks of these libraries whose metadata matches every filter, but those excluded (a
    view adds who may read them: kbus_searcher.store.view)."""
    where: _Filters = Filter.by_property("library").contains_any(list(libraries))
    for key, wanted in filters.items():
        values = wanted if isinstance(wanted, tuple) else (wanted,)
        where = where & Filter.by_property("metadata_kv").contains_any(
            [f"{key}={_scalar_term(v)}" for v in values]
        )
    for document_id in exclude_documents:
        where = where & Filter.by_property("document_id").not_equal(document_id)
    return where


def readable(readers: tuple[str, ...]) -> _Filters:
    """Chunks whose document's access names one of ``readers`` (always "*", everyone, and the
    principals the caller acts for)."""
    return Filter.by_property("access").contains_any(list(readers))


def document(library: str, document_id: str) -> _Filters:
    """Every chunk of one document (of any version)."""
    return Filter.by_property("library").equal(library) & Filter.by_property("document_id").equal(
        document_id
    )


def own_objects() -> _Filters:
    """Chunks' own objects, not their matching texts' (what counts chunks and documents)."""
    return Filter.by_property("match").equal(0)
