"""The Weaviate collection of chunks: its schema, writes and queries.

One collection holds every chunk; each kbus tenant is a Weaviate tenant (native multi-tenancy),
and libraries are a filtered property inside it. The schema is explicit and the vectors are ours.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import weaviate
from kbus_shared.analysis import analyze, keyword_text
from kbus_shared.contracts import DocumentDeleted, EmbeddingsReady, MetadataScalar, SearchType
from kbus_shared.errors import PermanentError, TransientError
from weaviate.classes.aggregate import GroupByAggregate
from weaviate.classes.config import (
    Configure,
    DataType,
    Property,
    Reconfigure,
    Tokenization,
    VectorDistances,
)
from weaviate.classes.data import DataObject
from weaviate.classes.query import Filter, HybridFusion, MetadataQuery, Sort
from weaviate.classes.tenants import Tenant
from weaviate.collections.classes.filters import _Filters
from weaviate.exceptions import WeaviateBaseError, WeaviateInsertManyAllFailedError

if TYPE_CHECKING:
    from kbus_searcher.settings import SearcherSettings

log = logging.getLogger("kbus.searcher")

# Analysed by kbus (kbus_shared.analysis), so Weaviate only splits at spaces.
KEYWORD_PROPERTIES = ["keywords"]
MAX_RESULT_WINDOW = 1_000
#: Stored chunks of a batch's documents one read returns before asking per document or
#: deleting by filter.
STORED_LIMIT = 1_000
#: Weaviate's default QUERY_MAXIMUM_RESULTS: what one delete request deletes at most.
DELETE_LIMIT = 10_000
DocumentKey = tuple[str, str]  # (library, document id) inside one tenant
#: How long a searcher keeps the alias's target before looking again (a switch shows within it).
ACTIVE_TTL_S = 1.0
#: Below this many chunks in a search's scope Weaviate compares the query with every one of them
#: instead of walking the HNSW graph (why 10,000 and not Weaviate's 40,000:
#: ``SearcherSettings.flat_search_cutoff``).
DEFAULT_FLAT_SEARCH_CUTOFF = 10_000


@dataclass(frozen=True)
class StoredChunk:
    """What the indexer reads of a stored chunk to order publishes."""

    id: str
    key: DocumentKey
    version: str
    sequence: int


def _slug(model: str) -> str:
    """A model name as part of a collection name."""
    return re.sub(r"[^A-Za-z0-9]+", "_", model).strip("_")[:80] or "model"


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
]
RETURN_PROPERTIES = [p.name for p in SCHEMA_PROPERTIES if p.name != "keywords"]


@dataclass(frozen=True)
class Candidate:
    """A chunk the store returned, with the scores that placed it."""

    uuid: str
    properties: dict[str, Any]
    keyword: float | None
    vector: float | None
    fused: float | None


def metadata_terms(metadata: dict[str, Any]) -> list[str]:
    """``key=value`` terms for top-level scalar metadata (and each scalar of a list)."""
    terms: list[str] = []
    for key, value in metadata.items():
        values = value if isinstance(value, list) else [value]
        terms.extend(
            f"{key}={_scalar_term(v)}"
            for v in values
            if isinstance(v, str | int | float | bool) and v is not None
        )
    return terms


def _scalar_term(value: MetadataScalar) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


_EXPLAIN = re.compile(
    r"Result Set (keyword|vector),\w+\) Document \S+: original score ([-+0-9.eE]+)"
)


def parse_explain(explain: str | None) -> tuple[float | None, float | None]:
    """The raw keyword (BM25) and vector (cosine) scores out of a hybrid ``explain_score``."""
    found: dict[str, float] = {}
    for kind, value in _EXPLAIN.findall(explain or ""):
        found[kind] = float(value)
    return found.get("keyword"), found.get("vector")


class ChunkStore:
    """Reads and writes the chunk collection through an async Weaviate client."""

    def __init__(
        self,
        client: weaviate.WeaviateAsyncClient,
        collection: str,
        *,
        flat_search_cutoff: int = DEFAULT_FLAT_SEARCH_CUTOFF,
    ) -> None:
        self.client = client
        #: The alias searches read through; each model's vectors live in their own collection.
        self.base = collection
        self.flat_search_cutoff = flat_search_cutoff
        self._legacy = False
        self._known: set[str] = set()
        self._tenants: set[tuple[str, str]] = set()
        self._handles: dict[tuple[str, str], Any] = {}
        self._active: tuple[float, str | None] = (-ACTIVE_TTL_S, None)

    @classmethod
    def configured(
        cls, client: weaviate.WeaviateAsyncClient, settings: SearcherSettings
    ) -> ChunkStore:
        """The index a searcher's settings name, with their flat-search cutoff."""
        return cls(
            client, settings.store.collection, flat_search_cutoff=settings.flat_search_cutoff
        )

    @property
    def legacy(self) -> bool:
        """Whether this index is one collection from before collections per model."""
        return self._legacy

    def physical(self, model: str) -> str:
        """The collection that holds the vectors of one model."""
        if self._legacy:
            return self.base
        return f"{self.base}_{_slug(model)}"

    async def ensure_collection(self) -> None:
        """Start-up: find the index, and upgrade an older schema.

        A real collection under the base name is an index from before collections per model:
        it stays in use as it is (switching its model is not possible).
        """
        no_alias = await self.client.alias.get(alias_name=self.base) is None
        if no_alias and await self.client.collections.exists(self.base):
            self._legacy = True
            await self._ensure(self.base)
            return
        for name in await self.all_physical():
            await self._ensure(name)

    async def _ensure(self, name: str) -> None:
        """Create a collection with the explicit schema, or add properties a newer kbus needs."""
        if name in self._known:
            return
        if await self.client.collections.exists(name):
            await self._upgrade(name)
            self._known.add(name)
            return
        try:
            await self.client.collections.create(
                name,
                description="kbus chunks: one Weaviate tenant per kbus tenant",
                vector_config=Configure.Vectors.self_provided(
                    vector_index_config=Configure.VectorIndex.hnsw(
                        distance_metric=VectorDistances.COSINE,
                        flat_search_cutoff=self.flat_search_cutoff,
                    )
                ),
                multi_tenancy_config=Configure.multi_tenancy(
                    enabled=True, auto_tenant_creation=False, auto_tenant_activation=True
                ),
                inverted_index_config=Configure.inverted_index(bm25_k1=1.2, bm25_b=0.75),
                properties=SCHEMA_PROPERTIES,
            )
            log.info("created collection %s", name)
        except WeaviateBaseError:
            # Another replica may have created it at the same moment.
            if not await self.client.collections.exists(name):
                raise
        self._known.add(name)

    async def _upgrade(self, name: str) -> None:
        """Add properties a newer kbus needs; apply this searcher's flat-search cutoff."""
        collection = self.client.collections.use(name)
        config = await collection.config.get()
        present = {p.name for p in config.properties}
        for prop in SCHEMA_PROPERTIES:
            if prop.name not in present:
                await collection.config.add_property(prop)
                log.info("added property %s to collection %s", prop.name, name)
        for vector_name, vector in (config.vector_config or {}).items():
            index = vector.vector_index_config
            cutoff = getattr(index, "flat_search_cutoff", self.flat_search_cutoff)
            if cutoff != self.flat_search_cutoff:
                await collection.config.update(
                    vector_config=Reconfigure.Vectors.update(
                        name=vector_name,
                        vector_index_config=Reconfigure.VectorIndex.hnsw(
                            flat_search_cutoff=self.flat_search_cutoff
                        ),
                    )
                )
                log.info(
                    "collection %s: flat search below %d chunks (was %d)",
                    name,
                    self.flat_search_cutoff,
                    cutoff,
                )

    async def all_physical(self) -> list[str]:
        """Every collection of this index (one per model that has written to it)."""
        if self._legacy:
            return [self.base]
        names = await self.client.collections.list_all(simple=True)
        return sorted(n for n in names if n.startswith(f"{self.base}_"))

    async def drop(self) -> None:
        """Delete the whole index: its alias and the collection of every model."""
        names = await self.all_physical()
        await self.client.alias.delete(alias_name=self.base)
        for name in names:
            await self.client.collections.delete(name)
        self._known.clear()
        self._tenants.clear()
        self._handles.clear()
        self._active = (-ACTIVE_TTL_S, None)

    async def active(self) -> str | None:
        """The collection searches read (None until anything is indexed)."""
        if self._legacy:
            return self.base
        checked, name = self._active
        if time.monotonic() - checked < ACTIVE_TTL_S:
            return name
        alias = await self.client.alias.get(alias_name=self.base)
        name = alias.collection if alias is not None else None
        self._active = (time.monotonic(), name)
        return name

    async def refresh_active(self) -> bool:
        """Read the alias again now; returns whether searches should read another collection."""
        before = self._active[1]
        self._active = (-ACTIVE_TTL_S, None)
        return await self.active() != before

    async def switch_to(self, name: str) -> None:
        """Make searches read ``name``: one atomic move of the alias."""
        if await self.client.alias.get(alias_name=self.base) is None:
            await self.client.alias.create(alias_name=self.base, target_collection=name)
        else:
            await self.client.alias.update(alias_name=self.base, new_target_collection=name)
        self._active = (-ACTIVE_TTL_S, None)
        log.info("searches now read %s", name)

    async def _writable(self, model: str) -> str:
        """The collection of a model's vectors, created on first use; the first is active."""
        name = self.physical(model)
        await self._ensure(name)
        if not self._legacy and await self.active() is None:
            try:
                await self.client.alias.create(alias_name=self.base, target_collection=name)
            except WeaviateBaseError:
                if await self.client.alias.get(alias_name=self.base) is None:
                    raise
            self._active = (-ACTIVE_TTL_S, None)
        return name

    def _use(self, name: str, tenant: str) -> Any:
        # Built per call, handles took about 7% of the indexer's busy samples in a profile; a
        # handle holds no server state, so one is kept per collection and tenant.
        handle = self._handles.get((name, tenant))
        if handle is None:
            handle = self.client.collections.use(name).with_tenant(tenant)
            self._handles[(name, tenant)] = handle
        return handle

    async def ensure_tenant(self, tenant: str, name: str) -> None:
        """Create the Weaviate tenant of a kbus tenant in a collection on first use."""
        if (name, tenant) in self._tenants:
            return
        collection = self.client.collections.use(name)
        if not await collection.tenants.exists(tenant):
            try:
                await collection.tenants.create([Tenant(name=tenant)])
            except WeaviateBaseError:
                if not await collection.tenants.exists(tenant):
                    raise
        self._tenants.add((name, tenant))

    async def tenant_exists(self, tenant: str, name: str | None = None) -> bool:
        """Whether any chunk was ever written for this tenant (in the active collection)."""
        name = name or await self.active()
        if name is None:
            return False
        if (name, tenant) in self._tenants:
            return True
        if name not in self._known and not await self.client.collections.exists(name):
            return False
        exists = bool(await self.client.collections.use(name).tenants.exists(tenant))
        if exists:
            self._tenants.add((name, tenant))
        return exists

    async def upsert(self, ready: EmbeddingsReady) -> None:
        """Write one document's chunks; raise unless every object was stored."""
        [error] = await self.write([ready])
        if error is not None:
            raise error

    async def write(self, readies: Sequence[EmbeddingsReady]) -> list[Exception | None]:
        """Write the chunks of several documents in one request (one model, one tenant).

        Returns, per document, ``None`` when every chunk of it was stored, or the error that
        says why not: the request reports failed objects without raising, and one document's
        bad chunk must fail that document, not the others.
        """
        tenant = readies[0].document.tenant
        name = await self._writable(readies[0].model)
        await self.ensure_tenant(tenant, name)
        objects: list[DataObject[dict[str, Any], None]] = []
        owner: list[int] = []
        for i, ready in enumerate(readies):
            objects.extend(_objects(ready))
            owner.extend([i] * len(ready.chunks))
        try:
            result = await self._use(name, tenant).data.insert_many(objects)
        except WeaviateInsertManyAllFailedError as exc:
            return [_write_error(len(r.chunks), len(r.chunks), exc.message) for r in readies]
        failed: dict[int, list[str]] = {}
        for index, error in result.errors.items():
            failed.setdefault(owner[index], []).append(error.message)
        return [
            _write_error(len(failed[i]), len(r.chunks), failed[i][0]) if i in failed else None
            for i, r in enumerate(readies)
        ]

    async def count_stored(self, ready: EmbeddingsReady) -> int:
        """How many chunks of this publish of a document are stored."""
        doc = ready.document
        return await self.count_publish(
            self.physical(ready.model),
            doc.tenant,
            doc.library,
            doc.document_id,
            doc.version,
            doc.sequence,
        )

    async def count_publish(
        self, name: str, tenant: str, library: str, document_id: str, version: str, sequence: int
    ) -> int:
        """How many chunks of one publish of a document a collection holds."""
        if not await self.tenant_exists(tenant, name):
            return 0
        where = (
            _document(library, document_id)
            & Filter.by_property("version").equal(version)
            & Filter.by_property("sequence").equal(sequence)
        )
        result = await self._use(name, tenant).aggregate.over_all(filters=where, total_count=True)
        return int(result.total_count or 0)

    async def tenants(self, name: str) -> list[str]:
        """The tenants of a collection."""
        return sorted(await self.client.collections.use(name).tenants.get())

    async def read_chunks(self, name: str, tenant: str) -> AsyncIterator[dict[str, Any]]:
        """Every chunk of a tenant in a collection, with its id (``uuid``) and properties."""
        async for obj in self._use(name, tenant).iterator(
            return_properties=[p.name for p in SCHEMA_PROPERTIES]
        ):
            yield {"uuid": str(obj.uuid), **obj.properties}

    async def newest_sequence(self, ready: EmbeddingsReady) -> int | None:
        """The highest publish sequence stored for a document under this model, if any."""
        doc = ready.document
        tenant, library, document_id = doc.tenant, doc.library, doc.document_id
        name = self.physical(ready.model)
        if not await self.tenant_exists(tenant, name):
            return None
        result = await self._use(name, tenant).query.fetch_objects(
            filters=_document(library, document_id),
            sort=Sort.by_property("sequence", ascending=False),
            limit=1,
            return_properties=["sequence"],
        )
        if not result.objects:
            return None
        return int(result.objects[0].properties["sequence"])

    async def newest_sequences(self, readies: Sequence[EmbeddingsReady]) -> dict[DocumentKey, int]:
        """The highest stored sequence of each document later than a publish of it here.

        For several publishes of one model and tenant in one query; a document absent from the
        answer has nothing stored later than its publishes. An answer too large to be complete
        (rare: many stored chunks) falls back to a query per document.
        """
        earliest: dict[DocumentKey, int] = {}
        for ready in readies:
            key = doc_key(ready)
            earliest[key] = min(earliest.get(key, ready.document.sequence), ready.document.sequence)
        stored = await self._stored(readies)
        if stored is None:
            one_each = {doc_key(r): r for r in readies}
            newest = {key: await self.newest_sequence(r) for key, r in one_each.items()}
            return {k: n for k, n in newest.items() if n is not None and n > earliest[k]}
        later: dict[DocumentKey, int] = {}
        for chunk in stored:
            if chunk.sequence > earliest[chunk.key]:
                later[chunk.key] = max(later.get(chunk.key, 0), chunk.sequence)
        return later

    async def delete_superseded(self, readies: Sequence[EmbeddingsReady]) -> int:
        """Delete the chunks of every other version of these documents published before them.

        For several publishes of one model and tenant: one read of the documents' stored chunks,
        then one delete of the superseded ones by id (none when nothing is superseded). Asking
        Weaviate for ``sequence < s`` instead cost 0.36 ms of its CPU per chunk written with
        10,000 chunks stored, growing with the collection; the documents' own chunks 0.08
        (docs/performance.md, run AE).
        """
        stored = await self._stored(readies)
        first = readies[0]
        collection = self._use(self.physical(first.model), first.document.tenant)
        if stored is None:
            return await _delete_all(collection, _superseded(readies))
        publishes: dict[DocumentKey, list[tuple[str, int]]] = {}
        for ready in readies:
            doc = ready.document
            publishes.setdefault(doc_key(ready), []).append((doc.version, doc.sequence))
        ids = [
            chunk.id
            for chunk in stored
            if any(
                chunk.version != version and chunk.sequence < sequence
                for version, sequence in publishes[chunk.key]
            )
        ]
        if not ids:
            return 0
        return await _delete_all(collection, Filter.by_id().contains_any(ids))

    async def _stored(self, readies: Sequence[EmbeddingsReady]) -> list[StoredChunk] | None:
        """The stored chunks of these publishes' documents, or None if there are too many.

        Filtered by document only: Weaviate answers that from small posting lists, where a
        range on ``sequence`` read the whole collection's index.
        """
        first = readies[0]
        name = self.physical(first.model)
        if not await self.tenant_exists(first.document.tenant, name):
            return []
        documents = {doc_key(r) for r in readies}
        result = await self._use(name, first.document.tenant).query.fetch_objects(
            filters=Filter.any_of([_document(*key) for key in sorted(documents)]),
            limit=STORED_LIMIT,
            return_properties=["library", "document_id", "version", "sequence"],
        )
        if len(result.objects) >= STORED_LIMIT:
            return None
        return [
            StoredChunk(
                id=str(obj.uuid),
                key=(str(obj.properties["library"]), str(obj.properties["document_id"])),
                version=str(obj.properties["version"]),
                sequence=int(obj.properties["sequence"]),
            )
            for obj in result.objects
        ]

    async def delete_scope(self, deletion: DocumentDeleted, before_sequence: int) -> int:
        """Delete what a deletion names (document, library or tenant) published before it.

        Applies to the collection of every model, so a re-embedding in progress loses it too.
        """
        where = Filter.by_property("sequence").less_than(before_sequence)
        if deletion.library is not None:
            where = where & Filter.by_property("library").equal(deletion.library)
        if deletion.document_id is not None:
            where = where & Filter.by_property("document_id").equal(deletion.document_id)
        removed = 0
        for name in await self.all_physical():
            if await self.tenant_exists(deletion.tenant, name):
                removed += await _delete_all(self._use(name, deletion.tenant), where)
        return removed

    async def delete_publish(self, ready: EmbeddingsReady) -> int:
        """Delete the chunks written by this publish (a deletion overtook it)."""
        doc = ready.document
        where = _document(doc.library, doc.document_id) & Filter.by_property("sequence").equal(
            doc.sequence
        )
        return await _delete_all(self._use(self.physical(ready.model), doc.tenant), where)

    async def library_stats(self, tenant: str) -> list[tuple[str, int, int]]:
        """(library, documents, chunks) for every library of a tenant."""
        name = await self.active()
        if name is None or not await self.tenant_exists(tenant, name):
            return []
        col = self._use(name, tenant)
        by_library = GroupByAggregate(prop="library")
        chunks = await col.aggregate.over_all(group_by=by_library, total_count=True)
        # Every document has exactly one chunk at position 0.
        firsts = await col.aggregate.over_all(
            group_by=by_library,
            total_count=True,
            filters=Filter.by_property("position").equal(0),
        )
        documents = {str(g.grouped_by.value): int(g.total_count or 0) for g in firsts.groups}
        return sorted(
            (
                str(g.grouped_by.value),
                documents.get(str(g.grouped_by.value), 0),
                int(g.total_count or 0),
            )
            for g in chunks.groups
        )

    async def search(
        self,
        *,
        tenant: str,
        libraries: tuple[str, ...],
        query: str,
        vector: list[float] | None,
        search_type: SearchType,
        alpha: float,
        limit: int,
        filters: dict[str, MetadataScalar | tuple[MetadataScalar, ...]],
        exclude_documents: tuple[str, ...] = (),
    ) -> list[Candidate]:
        """Candidates for a query, scoped to a tenant and its libraries."""
        name = await self.active()
        if name is None or not await self.tenant_exists(tenant, name):
            return []
        where = _scope(libraries, filters)
        for document_id in exclude_documents:
            where = where & Filter.by_property("document_id").not_equal(document_id)
        col = self._use(name, tenant)
        terms = analyze(query)
        if search_type is SearchType.KEYWORD:
            res = await col.query.bm25(
                query=terms,
                query_properties=KEYWORD_PROPERTIES,
                limit=limit,
                filters=where,
                return_metadata=MetadataQuery(score=True),
                return_properties=RETURN_PROPERTIES,
            )
            return distinct(
                Candidate(str(o.uuid), o.properties, o.metadata.score, None, None)
                for o in res.objects
            )
        if search_type is SearchType.VECTOR:
            res = await col.query.near_vector(
                near_vector=vector,
                limit=limit,
                filters=where,
                return_metadata=MetadataQuery(distance=True),
                return_properties=RETURN_PROPERTIES,
            )
            return distinct(
                Candidate(str(o.uuid), o.properties, None, 1.0 - float(o.metadata.distance), None)
                for o in res.objects
            )
        res = await col.query.hybrid(
            query=terms,
            vector=vector,
            alpha=alpha,
            limit=limit,
            filters=where,
            fusion_type=HybridFusion.RELATIVE_SCORE,
            query_properties=KEYWORD_PROPERTIES,
            return_metadata=MetadataQuery(score=True, explain_score=True),
            return_properties=RETURN_PROPERTIES,
        )
        candidates = []
        for o in res.objects:
            keyword, cosine = parse_explain(o.metadata.explain_score)
            candidates.append(
                Candidate(str(o.uuid), o.properties, keyword, cosine, o.metadata.score)
            )
        return distinct(candidates)


def distinct(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Each chunk once, at its first (best) place.

    Weaviate 1.36 to 1.38.16 can return one object twice from a filtered graph search (ACORN
    enters its entry point twice; fixed in 1.38.17, weaviate/weaviate#13211, which cannot be
    built here: a module it needs is not served).
    """
    seen: set[str] = set()
    unique = []
    for candidate in candidates:
        if candidate.uuid not in seen:
            seen.add(candidate.uuid)
            unique.append(candidate)
    return unique


_REJECTED = ("dimensions do not match", "vector lengths don't match", "invalid ")


def doc_key(ready: EmbeddingsReady) -> DocumentKey:
    """A document inside its tenant: (library, document id)."""
    return ready.document.library, ready.document.document_id


def _objects(ready: EmbeddingsReady) -> list[DataObject[dict[str, Any], None]]:
    doc = ready.document
    base = {
        "title": doc.title,
        "library": doc.library,
        "document_id": doc.document_id,
        "version": doc.version,
        "sequence": doc.sequence,
        "model": ready.model,
        "source_uri": doc.source_uri,
        "metadata_json": json.dumps(doc.metadata),
        "metadata_kv": metadata_terms(doc.metadata),
    }
    return [
        DataObject(
            uuid=uuid.UUID(chunk.chunk_id),
            vector=list(chunk.vector),
            properties={
                **base,
                "text": chunk.text,
                "keywords": chunk.keywords
                or keyword_text(doc.title, chunk.heading_path, chunk.text),
                "heading_path": list(chunk.heading_path),
                "heading_text": " > ".join(chunk.heading_path),
                "position": chunk.position,
                "char_start": chunk.char_start,
                "char_end": chunk.char_end,
            },
        )
        for chunk in ready.chunks
    ]


def _write_error(failed: int, total: int, first: str) -> PermanentError | TransientError:
    """Failed objects fail their document: permanently for data the store rejects."""
    summary = f"{failed} of {total} chunks were not stored: {first}"
    if any(marker in first for marker in _REJECTED):
        return PermanentError(summary, code="store_rejected")
    return TransientError(summary, code="store_write_failed")


async def _delete_all(collection: Any, where: _Filters) -> int:
    """Delete every match: one request deletes at most the server's query maximum."""
    removed = 0
    while True:
        result = await collection.data.delete_many(where=where)
        removed += int(result.successful)
        if result.matches < DELETE_LIMIT or not result.successful:
            return removed


def _superseded(readies: Sequence[EmbeddingsReady]) -> _Filters:
    return Filter.any_of(
        [
            _document(r.document.library, r.document.document_id)
            & Filter.by_property("version").not_equal(r.document.version)
            & Filter.by_property("sequence").less_than(r.document.sequence)
            for r in readies
        ]
    )


def _document(library: str, document_id: str) -> _Filters:
    return Filter.by_property("library").equal(library) & Filter.by_property("document_id").equal(
        document_id
    )


def _scope(
    libraries: tuple[str, ...], filters: dict[str, MetadataScalar | tuple[MetadataScalar, ...]]
) -> _Filters:
    where: _Filters = Filter.by_property("library").contains_any(list(libraries))
    for key, wanted in filters.items():
        values = wanted if isinstance(wanted, tuple) else (wanted,)
        where = where & Filter.by_property("metadata_kv").contains_any(
            [f"{key}={_scalar_term(v)}" for v in values]
        )
    return where
