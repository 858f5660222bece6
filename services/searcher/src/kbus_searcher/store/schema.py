"""The chunk collection's explicit schema, and creating a collection with it.

Each kbus tenant is a Weaviate tenant (native multi-tenancy); libraries are a filtered property
inside it. The vectors are kbus's own (cosine HNSW), and keyword search reads the ``keywords``
property, which kbus analyses itself (:mod:`kbus_runtime.analysis`), so Weaviate only splits it
at spaces.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from kbus_runtime.store import StoreClient
from weaviate.classes.config import (
    Configure,
    ConsistencyLevel,
    DataType,
    Property,
    Reconfigure,
    ReplicationDeletionStrategy,
    Tokenization,
    VectorDistances,
)
from weaviate.collections.classes.config import ReplicationConfigCreate
from weaviate.exceptions import WeaviateBaseError

log = logging.getLogger("kbus.searcher")

KEYWORD_PROPERTIES = ["keywords"]
#: The chunk's own vector (searched through the HNSW graph).
CHUNK_VECTOR = "chunk"
#: Its document's vector, the normalised mean of the document's chunk vectors (a window of up
#: to one chunks.ready part's chunks for a long document). Only read back with candidates,
#: never searched: a flat index keeps no graph for it.
DOCUMENT_VECTOR = "document"


def _text(name: str, *, searchable: bool = False, filterable: bool = True) -> Property:
    return Property(
        name=name,
        data_type=DataType.TEXT,
        tokenization=Tokenization.WORD if searchable else Tokenization.FIELD,
        index_searchable=searchable,
        index_filterable=filterable,
    )


def _int(name: str, *, filterable: bool = False) -> Property:
    return Property(
        name=name,
        data_type=DataType.INT,
        index_filterable=filterable,
        index_range_filters=filterable,
    )


SCHEMA_PROPERTIES = [
    Property(
        name="keywords",
        data_type=DataType.TEXT,
        tokenization=Tokenization.WHITESPACE,
        index_searchable=True,
        index_filterable=False,
    ),
    _text("text", searchable=True, filterable=False),
    _text("title", searchable=True, filterable=False),
    _text("heading_text", searchable=True, filterable=False),
    Property(
        name="heading_path",
        data_type=DataType.TEXT_ARRAY,
        index_filterable=False,
        index_searchable=False,
    ),
    _text("library"),
    _text("document_id"),
    _text("version"),
    _text("model"),
    _text("source"),
    # Who may read the chunk: its document's principals, or "*" for everyone (kbus_contract
    # EVERYONE); every search filters on it in the store query.
    Property(
        name="access",
        data_type=DataType.TEXT_ARRAY,
        tokenization=Tokenization.FIELD,
        index_filterable=True,
        index_searchable=False,
    ),
    _text("source_uri", filterable=False),
    _text("metadata_json", filterable=False),
    Property(
        name="metadata_kv",
        data_type=DataType.TEXT_ARRAY,
        tokenization=Tokenization.FIELD,
        index_searchable=False,
    ),
    _int("sequence", filterable=True),
    _int("position", filterable=True),
    _int("char_start"),
    _int("char_end"),
    _int("page"),  # 0: the document has no pages
    # 0: the chunk's own object; i: its i-th matching text's, whose vector and keywords are that
    # text's (kept in `matched`) and whose other properties are the chunk's.
    _int("match", filterable=True),
    _text("matched", filterable=False),
]
#: What a search returns of a chunk (everything but the analysed keyword text).
RETURN_PROPERTIES = [p.name for p in SCHEMA_PROPERTIES if p.name != "keywords"]
#: Everything stored, as a re-embedding copies it.
ALL_PROPERTIES = [p.name for p in SCHEMA_PROPERTIES]


def slug(model: str) -> str:
    """A model name as part of a collection name."""
    return re.sub(r"[^A-Za-z0-9]+", "_", model).strip("_")[:80] or "model"


@dataclass(frozen=True)
class Replication:
    """Copies of a collection's shards, how their conflicts resolve, and how many replicas
    confirm a write or answer a read (``StoreSettings`` says why each default)."""

    factor: int = 1
    deletion_strategy: str = "DeleteOnConflict"
    write: str = "ALL"
    read: str = "QUORUM"

    def config(self) -> ReplicationConfigCreate:
        # The server runs asynchronous replication (the repair of a replica that missed writes
        # while it was down) for any factor above one.
        return Configure.replication(
            factor=self.factor,
            deletion_strategy=ReplicationDeletionStrategy(self.deletion_strategy),
        )

    def level(self, write: bool) -> ConsistencyLevel:
        return ConsistencyLevel(self.write if write else self.read)


async def create_collection(
    client: StoreClient,
    name: str,
    flat_search_cutoff: int,
    replication: Replication,
) -> None:
    """Create a collection with the schema (another replica may create it at the same time)."""
    try:
        await client.collections.create(
            name,
            replication_config=replication.config(),
            description="kbus chunks: one Weaviate tenant per kbus tenant",
            vector_config=[
                Configure.Vectors.self_provided(
                    name=CHUNK_VECTOR,
                    vector_index_config=Configure.VectorIndex.hnsw(
                        distance_metric=VectorDistances.COSINE,
                        flat_search_cutoff=flat_search_cutoff,
                    ),
                ),
                Configure.Vectors.self_provided(
                    name=DOCUMENT_VECTOR,
                    vector_index_config=Configure.VectorIndex.flat(
                        distance_metric=VectorDistances.COSINE
                    ),
                ),
            ],
            multi_tenancy_config=Configure.multi_tenancy(
                enabled=True, auto_tenant_creation=False, auto_tenant_activation=True
            ),
            inverted_index_config=Configure.inverted_index(bm25_k1=1.2, bm25_b=0.75),
            properties=SCHEMA_PROPERTIES,
        )
        log.info("created collection %s", name)
    except WeaviateBaseError:
        if not await client.collections.exists(name):
            raise


async def apply_flat_search_cutoff(collection: Any, cutoff: int) -> None:
    """Set a collection's flat-search cutoff to this searcher's setting, if it differs."""
    config = await collection.config.get()
    for vector_name, vector in (config.vector_config or {}).items():
        current = getattr(vector.vector_index_config, "flat_search_cutoff", cutoff)
        if current == cutoff:
            continue
        await collection.config.update(
            vector_config=Reconfigure.Vectors.update(
                name=vector_name,
                vector_index_config=Reconfigure.VectorIndex.hnsw(flat_search_cutoff=cutoff),
            )
        )
        log.info(
            "collection %s: flat search below %d chunks (was %d)", config.name, cutoff, current
        )


async def add_missing_properties(collection: Any) -> None:
    """Add the schema's properties a collection made by an earlier kbus lacks (its chunks read
    as null there: a chunk with no ``access`` is found by no search until it is reprocessed,
    ``python -m kbus_searcher.jobs.reprocess``)."""
    config = await collection.config.get()
    present = {p.name for p in config.properties}
    for prop in SCHEMA_PROPERTIES:
        if prop.name not in present:
            await collection.config.add_property(prop)
            log.info("collection %s: added property %s", config.name, prop.name)
