"""A publish's standing: whether it is still the one to keep, ruled in one place.

The subtlest rule kbus keeps: the publish published last wins however the messages interleave
on their way, a deletion or a sync wins over what was published before it, and a search sees a
document's old version or its new one, never neither and never a deleted one. The indexer asks
for a ruling on each publish of a batch twice, each time from one reading of each bucket:

- **before the write**, from the copies kept in memory (the tombstones, the sync marks), the
  newest publish the gate remembers, and the newest sequence the store holds of each document
  (the indexer reads it for the batch): a publish a deletion or a sync made unwanted, or that
  a later publish (stored, in the same batch, or announced) replaced, is not written;
- **after the write**, from the buckets themselves: a complete publish is made the searchable
  one (the versions' conditional advance) unless a later one already is; a part of a publish
  that can no longer complete (a later publish is searchable) lost; and a deletion or a sync
  recorded meanwhile takes back what was written (a deletion records its tombstone before it
  deletes, so either it saw these chunks or this reading sees it).

What lost is undone, once per phase, by :mod:`kbus_searcher.index.undoing`. The interleavings
this rules on are the table in docs/reliability.md, "The indexer's rulings", each one a case of
``tests/integration/test_standing.py`` (on real buckets).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from kbus_contract import DocumentRef

from kbus_searcher.ordering import DocumentKey
from kbus_searcher.state.syncmarks import SyncMarks
from kbus_searcher.state.tombstones import Tombstones
from kbus_searcher.state.versions import Versions


class Ruling(StrEnum):
    """What a publish's standing is (every value but ``keep`` is why it lost, as counted)."""

    #: Still the one to keep: written, or made searchable.
    KEEP = "keep"
    #: A deletion of it, its library or its tenant was published after it.
    DELETED = "deleted"
    #: A sync of its source, published after it, did not list it.
    UNLISTED = "unlisted"
    #: The same document was published again after it (the gate's newest publish).
    WITHDRAWN = "withdrawn"
    #: A later publish of the document is stored or in the same batch.
    SUPERSEDED = "superseded"
    #: A later publish of the document is already the searchable one.
    OVERTAKEN = "overtaken"

    @property
    def lost(self) -> bool:
        return self is not Ruling.KEEP


#: Whether a publish is still wanted at all (not deleted or published again since):
#: :meth:`kbus_runtime.stage.Stage.wanted`.
Wanted = Callable[[DocumentRef], Awaitable[bool]]


@dataclass(frozen=True)
class Standing:
    """Rules on publishes from the buckets the searcher follows."""

    tombstones: Tombstones
    versions: Versions
    syncs: SyncMarks | None = None
    wanted: Wanted | None = None

    async def before_write(
        self, publishes: Sequence[DocumentRef], stored: Mapping[DocumentKey, int]
    ) -> list[Ruling]:
        """Each publish's ruling before its chunks are written; ``stored``: the newest
        sequence the store holds of each document, where later than a publish of it here."""
        deletions = await self.tombstones.barriers_copied(
            [(d.tenant, d.library, d.document_id) for d in publishes]
        )
        unlisted = await self._unlisted(publishes, fresh=False)
        rulings: list[Ruling] = []
        for doc, barrier, gone in zip(publishes, deletions, unlisted, strict=True):
            if barrier > doc.sequence:
                rulings.append(Ruling.DELETED)
            elif gone:
                rulings.append(Ruling.UNLISTED)
            elif self.wanted is not None and not await self.wanted(doc):
                rulings.append(Ruling.WITHDRAWN)
            else:
                rulings.append(Ruling.KEEP)
        newest = dict(stored)
        for doc, ruling in zip(publishes, rulings, strict=True):
            if ruling is Ruling.KEEP:
                key = (doc.library, doc.document_id)
                newest[key] = max(newest.get(key, 0), doc.sequence)
        return [
            Ruling.SUPERSEDED
            if ruling is Ruling.KEEP and newest[(doc.library, doc.document_id)] > doc.sequence
            else ruling
            for doc, ruling in zip(publishes, rulings, strict=True)
        ]

    async def after_write(
        self, publishes: Sequence[DocumentRef], complete: Sequence[bool]
    ) -> list[Ruling]:
        """Each written publish's ruling: a complete one made searchable (or overtaken, or taken
        back by a deletion or sync recorded meanwhile), a part kept unless it can no longer
        complete."""
        rulings = list(
            await asyncio.gather(
                *(self._standing(d, whole) for d, whole in zip(publishes, complete, strict=True))
            )
        )
        advanced = [i for i, r in enumerate(rulings) if r is Ruling.KEEP and complete[i]]
        docs = [publishes[i] for i in advanced]
        deletions = await self.tombstones.barriers(
            [(d.tenant, d.library, d.document_id) for d in docs]
        )
        unlisted = await self._unlisted(docs, fresh=True)
        for i, doc, barrier, gone in zip(advanced, docs, deletions, unlisted, strict=True):
            if barrier > doc.sequence:
                rulings[i] = Ruling.DELETED
            elif gone:
                rulings[i] = Ruling.UNLISTED
        return rulings

    async def _standing(self, doc: DocumentRef, complete: bool) -> Ruling:
        """A complete publish advances the document's entry (unless a later one is there); a
        part stands unless a later publish is already searchable."""
        args = (doc.tenant, doc.library, doc.document_id, doc.sequence, doc.version)
        if complete:
            return Ruling.KEEP if await self.versions.advance(*args) else Ruling.OVERTAKEN
        return Ruling.OVERTAKEN if await self.versions.later_than(*args) else Ruling.KEEP

    async def _unlisted(self, publishes: Sequence[DocumentRef], *, fresh: bool) -> list[bool]:
        """Whether a sync of each publish's source, published after it, did not list it."""
        if self.syncs is None or not publishes:
            return [False] * len(publishes)
        return await self.syncs.unlisted(
            [(d.tenant, d.library, d.source, d.document_id, d.sequence) for d in publishes],
            fresh=fresh,
        )
