"""The chaos test's ledger: documents, their versions and deletions, in publish order.

Every document carries a token of its own in its title, so a keyword search for that token
must find exactly that document's chunks. Some documents get a second version with fewer
chunks (a stale chunk would show), some are deleted after their last publish, and some are
dropped by their source: every tenant's source syncs twice (midway and after the last publish),
listing what it holds then, so a dropped document published before a sync is removed by it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from kbus_contract import DocumentAdded
from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.profiling import Cutter

from tests.cutting import chunk_document

LIBRARY = "chaos"
#: The source every document belongs to (what the syncs list).
SOURCE = "feed"
#: When each tenant's source syncs, as a share of the publishing time.
SYNCS_AT = (0.5, 1.01)
TENANTS = tuple(f"tenant{i}" for i in range(5))

_VOCABULARY = (
    "river stone lantern harvest orbit copper meadow signal thunder velvet anchor ember "
    "glacier harbor island jasmine kettle ledger marble needle orchard pepper quartz rafter "
    "saddle timber umbrella valley willow yarrow zephyr basalt cinder dune falcon granite "
    "heron ivory juniper kelp lichen mortar nectar onyx pollen quiver ridge sorrel tundra "
    "update vessel wharf bramble cobalt delta fennel gravel hollow inlet jetty knoll lagoon "
    "mesa nimbus oxbow prairie quarry reef summit thicket upland vapor wetland"
)
_WORDS = tuple(_VOCABULARY.split())


@dataclass
class LedgerDoc:
    """One document and everything the ledger does to it."""

    tenant: str
    document_id: str
    token: str
    versions: list[str] = field(default_factory=list)
    deleted: bool = False
    #: The source no longer lists it (it is never in a sync's list).
    dropped: bool = False

    @property
    def title(self) -> str:
        return f"Record {self.token}"

    def added(self, version: int) -> DocumentAdded:
        return DocumentAdded(
            tenant=self.tenant,
            library=LIBRARY,
            document_id=self.document_id,
            title=self.title,
            text=self.versions[version],
            version=f"v{version + 1}",
            source=SOURCE,
        )

    def expected_chunk_ids(self) -> set[str]:
        """The chunk ids the store must hold for this document when all is done."""
        if self.deleted:
            return set()
        ready = chunk_document(
            self.added(len(self.versions) - 1), Cutter.recursive(ChunkingConfig()), 1_000
        )
        return {chunk.chunk_id for chunk in ready.chunks}


@dataclass(frozen=True)
class Event:
    """Publish one version of a document (``version`` >= 0) or delete it (``version`` -1); or,
    without a document, sync ``tenant``'s source: ``listed`` (id, version) is all it holds."""

    doc: LedgerDoc | None
    version: int
    tenant: str = ""
    listed: tuple[tuple[str, str], ...] = ()


def _text(rng: random.Random, chunks: int) -> str:
    target = rng.randint(180, 420) + 470 * (chunks - 1)
    sentences: list[str] = []
    while sum(len(s) + 1 for s in sentences) < target:
        words = rng.choices(_WORDS, k=rng.randint(6, 14))
        sentences.append(" ".join(words).capitalize() + ".")
    return " ".join(sentences)


def build_ledger(documents: int, seed: int) -> tuple[list[LedgerDoc], list[Event]]:
    """Documents spread over five tenants, and the events in the order they are published."""
    rng = random.Random(seed)
    docs: list[LedgerDoc] = []
    timed: list[tuple[float, Event]] = []
    for i in range(documents):
        doc = LedgerDoc(TENANTS[i % len(TENANTS)], f"doc-{i:05d}", f"qz{rng.getrandbits(40):010x}")
        chunks = rng.randint(1, 3)
        doc.versions.append(_text(rng, chunks))
        at = rng.random()
        timed.append((at, Event(doc, 0)))
        if rng.random() < 0.15:
            # A second version with fewer chunks where it can: a stale chunk would remain.
            doc.versions.append(_text(rng, max(1, chunks - 1)))
            at += rng.uniform(0.005, 0.2)
            timed.append((at, Event(doc, 1)))
        if rng.random() < 0.05:
            timed.append((at + rng.uniform(0.005, 0.1), Event(doc, -1)))
        doc.dropped = rng.random() < 0.05
        docs.append(doc)
    timed += [(at, Event(None, -2, tenant)) for tenant in TENANTS for at in SYNCS_AT]
    timed.sort(key=lambda pair: pair[0])
    return docs, _replay([event for _, event in timed])


def _replay(events: list[Event]) -> list[Event]:
    """The events with each sync's list, and each document marked deleted if it ends gone."""
    alive: dict[str, tuple[LedgerDoc, int]] = {}
    replayed = []
    for event in events:
        if event.doc is None:
            held = [(d, v) for d, v in alive.values() if d.tenant == event.tenant]
            listed = tuple(sorted((d.document_id, f"v{v + 1}") for d, v in held if not d.dropped))
            for d, _ in held:
                if d.dropped:
                    del alive[d.document_id]
            event = Event(None, -2, event.tenant, listed)
        elif event.version < 0:
            alive.pop(event.doc.document_id, None)
        else:
            alive[event.doc.document_id] = (event.doc, event.version)
        replayed.append(event)
    for doc in {e.doc.document_id: e.doc for e in events if e.doc is not None}.values():
        doc.deleted = doc.document_id not in alive
    return replayed
