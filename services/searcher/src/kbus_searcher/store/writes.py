"""The indexer's writes and deletes, and what it reads to order publishes.

Batch inserts report failed objects without raising: :meth:`ChunkWriter.write` checks them
object by object, so one document's bad chunk fails that document and not the others.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from kbus_contract import DocumentDeleted, EmbeddingsReady
from kbus_contract.identifiers import EVERYONE
from kbus_runtime.tracing import store_span
from weaviate.classes.data import DataObject
from weaviate.classes.query import Filter, Sort
from weaviate.collections.classes.filters import _Filters
from weaviate.exceptions import WeaviateInsertManyAllFailedError

from kbus_searcher.ordering import DocumentKey, rank
from kbus_searcher.store import filters
from kbus_searcher.store.collections import Collections
from kbus_searcher.store.errors import deletion_error, write_error
from kbus_searcher.store.objects import objects_of
from kbus_searcher.store.pressure import Pressure
from kbus_searcher.store.schema import ALL_PROPERTIES

#: Stored chunks of a batch's documents one read returns before asking per document or
#: deleting by filter.
STORED_LIMIT = 1_000
#: Weaviate's default QUERY_MAXIMUM_RESULTS: what one delete request deletes at most.
DELETE_LIMIT = 10_000


@dataclass(frozen=True)
class StoredChunk:
    """What the indexer reads of a stored chunk to order publishes."""

    id: str
    key: DocumentKey
    version: str
    sequence: int


def doc_key(ready: EmbeddingsReady) -> DocumentKey:
    """A document inside its tenant: (library, document id)."""
    return ready.document.library, ready.document.document_id


class ChunkWriter:
    """Writes documents' chunks into the collection of their model, and deletes them."""

    def __init__(self, collections: Collections, pressure: Pressure | None = None) -> None:
        self.collections = collections
        #: The searches this process answers, which writes yield to.
        self.pressure = pressure or Pressure()

    async def write(self, readies: Sequence[EmbeddingsReady]) -> list[Exception | None]:
        """Write the chunks of several documents in one request (one model, one tenant).

        Returns, per document, ``None`` when every chunk of it was stored, or the error that
        says why not.
        """
        tenant = readies[0].document.tenant
        name = await self.collections.writable(readies[0].model)
        await self.collections.ensure_tenant(tenant, name)
        objects: list[DataObject[dict[str, Any], None]] = []
        owner: list[int] = []
        for i, ready in enumerate(readies):
            made = objects_of(ready)
            objects.extend(made)
            owner.extend([i] * len(made))
        failed: dict[int, list[str]] = {}
        handle = self.collections.use(name, tenant, write=True)
        for part in self.pressure.slices(len(objects)):
            # Searches first: none waits behind a whole batch (store.pressure).
            await self.pressure.room_to_write()
            try:
                with store_span("insert", name, tenant) as span:
                    span.set_attribute("kbus.chunks", len(part))
                    result = await handle.data.insert_many(objects[part.start : part.stop])
            except WeaviateInsertManyAllFailedError as exc:
                for index in part:
                    failed.setdefault(owner[index], []).append(exc.message)
                continue
            for index, error in result.errors.items():
                failed.setdefault(owner[part.start + index], []).append(error.message)
        return [
            write_error(len(failed[i]), len(r.chunks), failed[i][0]) if i in failed else None
            for i, r in enumerate(readies)
        ]

    async def count_stored(self, ready: EmbeddingsReady) -> int:
        """How many chunks of this publish of a document are stored."""
        doc = ready.document
        return await self.count_publish(
            self.collections.physical(ready.model),
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
        if not await self.collections.tenant_exists(tenant, name):
            return 0
        where = (
            filters.document(library, document_id)
            & Filter.by_property("version").equal(version)
            & Filter.by_property("sequence").equal(sequence)
            & filters.own_objects()
        )
        return await _count(self.collections.use(name, tenant, write=True), where)

    async def read_chunks(self, name: str, tenant: str) -> AsyncIterator[dict[str, Any]]:
        """Every chunk of a tenant in a collection, with its id (``uuid``) and properties."""
        async for obj in self.collections.use(name, tenant, write=True).iterator(
            return_properties=ALL_PROPERTIES
        ):
            yield {"uuid": str(obj.uuid), **obj.properties}

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
            newest = {key: await self._newest_sequence(r) for key, r in one_each.items()}
            return {k: n for k, n in newest.items() if n is not None and n > earliest[k]}
        later: dict[DocumentKey, int] = {}
        for chunk in stored:
            if chunk.sequence > earliest[chunk.key]:
                later[chunk.key] = max(later.get(chunk.key, 0), chunk.sequence)
        return later

    async def _newest_sequence(self, ready: EmbeddingsReady) -> int | None:
        """The highest publish sequence stored for a document under this model, if any."""
        doc = ready.document
        name = self.collections.physical(ready.model)
        if not await self.collections.tenant_exists(doc.tenant, name):
            return None
        result = await self.collections.use(name, doc.tenant, write=True).query.fetch_objects(
            filters=filters.document(doc.library, doc.document_id),
            sort=Sort.by_property("sequence", ascending=False),
            limit=1,
            return_properties=["sequence"],
        )
        if not result.objects:
            return None
        return int(result.objects[0].properties["sequence"])

    async def delete_superseded(self, readies: Sequence[EmbeddingsReady]) -> int:
        """Delete the chunks of every other version of these documents published before them
        (:func:`kbus_searcher.store.recuts.rank`: a text cut again replaces the publish it was cut
        from, at the same sequence), and what an earlier publish of the same version left at
        positions this one does not have (the positions it has, it overwrote: same ids).

        For several publishes of one model and tenant: one read of the documents' stored chunks,
        then one delete of the superseded ones by id (none when nothing is superseded). A range
        on ``sequence`` instead costs Weaviate CPU that grows with the collection
        (docs/tuning.md, "The indexer's reads and deletes").
        """
        stored = await self._stored(readies)
        first = readies[0]
        handle = self.collections.use(
            self.collections.physical(first.model), first.document.tenant, write=True
        )
        if stored is None:
            return await _delete_all(handle, _superseded(readies))
        publishes: dict[DocumentKey, list[tuple[str, int]]] = {}
        for ready in readies:
            doc = ready.document
            publishes.setdefault(doc_key(ready), []).append((doc.version, doc.sequence))
        ids = [
            chunk.id
            for chunk in stored
            if any(_superseded_by(chunk, v, sequence) for v, sequence in publishes[chunk.key])
        ]
        if not ids:
            return 0
        return await _delete_all(handle, Filter.by_id().contains_any(ids))

    async def _stored(self, readies: Sequence[EmbeddingsReady]) -> list[StoredChunk] | None:
        """The stored chunks of these publishes' documents, or None if there are too many.

        Filtered by document only: Weaviate answers that from small posting lists, where a
        range on ``sequence`` read the whole collection's index.
        """
        first = readies[0]
        name = self.collections.physical(first.model)
        if not await self.collections.tenant_exists(first.document.tenant, name):
            return []
        documents = sorted({doc_key(r) for r in readies})
        result = await self.collections.use(
            name, first.document.tenant, write=True
        ).query.fetch_objects(
            filters=Filter.any_of([filters.document(*key) for key in documents]),
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
        where = _deleted_by(deletion, before_sequence)
        removed = 0
        for name in await self.collections.all_physical():
            if await self.collections.tenant_exists(deletion.tenant, name):
                removed += await _delete_all(
                    self.collections.use(name, deletion.tenant, write=True), where
                )
        return removed

    async def deletes_restricted(self, deletion: DocumentDeleted, before_sequence: int) -> bool:
        """Whether a deletion would remove a chunk not everyone may read, or nothing at all
        (what it names may be a restricted document still on its way): its receipt then goes
        to those who may name restricted documents only."""
        where = _deleted_by(deletion, before_sequence)
        everyone = where & filters.readable((EVERYONE,))
        found = everyones = 0
        for name in await self.collections.all_physical():
            if await self.collections.tenant_exists(deletion.tenant, name):
                handle = self.collections.use(name, deletion.tenant, write=True)
                found += await _count(handle, where)
                everyones += await _count(handle, everyone)
        return found == 0 or everyones < found

    async def delete_publish(self, ready: EmbeddingsReady) -> int:
        """Delete the chunks written by this publish (a deletion or a later publish overtook
        it); by sequence and version, so a text cut again at the same sequence stays."""
        doc = ready.document
        where = (
            filters.document(doc.library, doc.document_id)
            & Filter.by_property("sequence").equal(doc.sequence)
            & Filter.by_property("version").equal(doc.version)
        )
        name = self.collections.physical(ready.model)
        if not await self.collections.tenant_exists(doc.tenant, name):
            return 0  # nothing of the tenant was ever written there
        return await _delete_all(self.collections.use(name, doc.tenant, write=True), where)


def _deleted_by(deletion: DocumentDeleted, before_sequence: int) -> _Filters:
    """The chunks a deletion removes: its document's, library's or tenant's, published before
    it."""
    where = Filter.by_property("sequence").less_than(before_sequence)
    if deletion.library is not None:
        where = where & Filter.by_property("library").equal(deletion.library)
    if deletion.document_id is not None:
        where = where & Filter.by_property("document_id").equal(deletion.document_id)
    return where


async def _count(handle: Any, where: _Filters) -> int:
    result = await handle.aggregate.over_all(filters=where, total_count=True)
    return int(result.total_count or 0)


async def _delete_all(handle: Any, where: _Filters) -> int:
    """Delete every match: one request deletes at most the server's query maximum. Objects a
    copy did not delete are counted, not raised: they fail the deletion here."""
    removed = 0
    while True:
        result = await handle.data.delete_many(where=where)
        if result.failed:
            raise deletion_error(int(result.failed), int(result.matches))
        removed += int(result.successful)
        if result.matches < DELETE_LIMIT or not result.successful:
            return removed


def _superseded_by(chunk: StoredChunk, version: str, sequence: int) -> bool:
    """Whether a publish at ``sequence`` of ``version`` supersedes a stored chunk: another
    version that ranks before it, or the same version published before it (what this publish
    wrote carries its own sequence: what carries an earlier one is a position it lacks)."""
    if chunk.version == version:
        return chunk.sequence < sequence
    return rank(chunk.sequence, chunk.version) < rank(sequence, version)


def _superseded(readies: Sequence[EmbeddingsReady]) -> _Filters:
    # Earlier sequences only: a filter cannot rank two texts at one sequence, so the chunks of
    # the publish a text was cut again from stay (never searched: the versions bucket names the
    # newer) until the document's next publish deletes them.
    return Filter.any_of(
        [
            filters.document(r.document.library, r.document.document_id)
            & Filter.by_property("sequence").less_than(r.document.sequence)
            for r in readies
        ]
    )
