"""Cut a library's documents again after its profile changed.

``python -m kbus_searcher.jobs.reprocess --tenant T --library L``: a profile decides for documents
published after it; the documents already indexed keep their chunks until they are published
again. This publishes each of them again, as the library's current profile would cut it:

1. Read the library's documents from the index (the newest publish of each). Every chunk is a
   slice of the text it was cut from (``char_start``/``char_end``) and kbus's chunkers leave
   out only whitespace between chunks, so the text is whole again from its chunks; what lay
   between two chunks comes back as line breaks.
2. Publish that text on ``document.added`` with the version ``<version>+profile<revision>``
   and ``recut_of`` = the stored publish's sequence: the ingestor cuts it with the profile,
   generates its matching texts if the profile asks, and the indexer replaces the old chunks
   without a mix, as for any new version. It ranks as the publish it was cut from
   (:mod:`kbus_searcher.store.recuts`), so a publisher's newer publish of the document, even one
   still on its way through the pipeline, wins over it, and so does a deletion. Unchanged
   chunk texts are not embedded again (the embedding cache). A document already at the
   profile's revision is left alone, so a second run publishes nothing.
3. Wait until each is searchable at its new version, or overtaken by a newer publish.

Not cut again (each named in the output with the reason; their publishers publish them
again): documents with pages (a PDF's or a slide deck's pages are not in the text) and records
(each record's own metadata is not). A publisher's own chunks and matching texts are not told
apart from kbus's in the index: such a document is cut by the profile like the others.

It connects as the searcher's settings say (``KBUS_NATS_*``, ``KBUS_WEAVIATE_*``); with
least-privilege NATS users, as ``admin`` (docs/security.md), which may publish any tenant's
documents again and read the buckets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kbus_contract import Chunk, ContentType, DocumentAdded
from kbus_contract.intake import scoped_msg_id
from kbus_contract.profiles import profile_key
from kbus_contract.topology import Topology
from kbus_contract.wire import until_acknowledged
from kbus_runtime.bus import JSON_HEADERS
from kbus_runtime.logs import configure_logging
from nats.aio.client import Client
from nats.js.errors import KeyNotFoundError

from kbus_searcher.jobs.stored import StoredDocument, connected, read_documents
from kbus_searcher.ordering import profile_version, rank
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.state.versions import Versions

log = logging.getLogger("kbus.reprocess")


@dataclass
class Outcome:
    """What a run did, per document id."""

    republished: list[str] = field(default_factory=list)
    searchable: list[str] = field(default_factory=list)
    #: Published again, then overtaken by the publisher's newer publish, which is searchable.
    overtaken: list[str] = field(default_factory=list)
    current: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    #: Published, not searchable at the new version in time (see the dead letters).
    pending: list[str] = field(default_factory=list)


def source_text(chunks: Sequence[Chunk]) -> str | None:
    """The text a document's chunks were cut from, or None where two chunks disagree about
    a character they share (then they are not slices of one text)."""
    text = ""
    for chunk in sorted(chunks, key=lambda c: (c.char_start, c.char_end)):
        if len(chunk.text) != chunk.char_end - chunk.char_start:
            return None
        if chunk.char_start > len(text):
            text += "\n" * (chunk.char_start - len(text))
        shared = min(len(text), chunk.char_end) - chunk.char_start
        if text[chunk.char_start :][:shared] != chunk.text[:shared]:
            return None
        text += chunk.text[shared:]
    return text


def recut(document: StoredDocument, revision: int) -> DocumentAdded | str:
    """The publish that cuts a stored document again, or why it cannot be."""
    chunks = document.chunks
    if any(c.page for c in chunks):
        return "it has pages, which its text does not keep: publish its file again"
    if len({json.dumps(c.metadata, sort_keys=True) for c in chunks}) > 1:
        return "its chunks are records with metadata of their own: publish its file again"
    text = source_text(chunks)
    if text is None or not text.strip():
        return "its chunks are not slices of one text"
    ref = document.ref
    markdown = any(c.heading_path for c in chunks)
    return DocumentAdded(
        tenant=ref.tenant,
        library=ref.library,
        document_id=ref.document_id,
        title=ref.title,
        text=text,
        source_uri=ref.source_uri,
        content_type=ContentType.MARKDOWN if markdown else ContentType.PLAIN,
        metadata=chunks[0].metadata if chunks else {},
        version=profile_version(ref.version, revision),
        recut_of=ref.sequence or None,
    )


async def profile_revision(nc: Client, topology: Topology, tenant: str, library: str) -> int:
    """The revision of a library's profile (0: never set)."""
    kv = await nc.jetstream().key_value(topology.profiles_kv.bucket)
    try:
        return (await kv.get(profile_key(tenant, library))).revision or 0
    except KeyNotFoundError:
        return 0


async def republish(
    nc: Client, topology: Topology, documents: list[StoredDocument], revision: int
) -> tuple[Outcome, dict[str, DocumentAdded]]:
    """Publish each document that is not at ``revision`` yet; returns the outcome so far and
    what was published, by document id."""
    outcome, waiting = Outcome(), {}
    for document in documents:
        doc_id = document.ref.document_id
        if document.ref.version == profile_version(document.ref.version, revision):
            outcome.current.append(doc_id)
            continue
        added = recut(document, revision)
        if isinstance(added, str):
            outcome.skipped[doc_id] = added
            continue
        if not await _publish(nc, topology, added):
            outcome.skipped[doc_id] = "its text is over the bus's message limit: publish it again"
            continue
        outcome.republished.append(doc_id)
        waiting[doc_id] = added
    return outcome, waiting


async def _publish(nc: Client, topology: Topology, added: DocumentAdded) -> bool:
    """Store it in the documents stream as the gate would have (the admin is kbus's own, not a
    tenant's), until stored; False when it is over the message limit."""
    payload = added.model_dump_json().encode()
    if len(payload) > nc.max_payload:
        return False
    msg_id = scoped_msg_id(added.tenant, added.library, added.message_id())
    headers = {**JSON_HEADERS, "Nats-Msg-Id": msg_id}
    subject = topology.accepted(topology.added(added.tenant, added.library))
    js = nc.jetstream()
    await until_acknowledged(lambda: js.publish(subject, payload, headers=headers))
    return True


async def wait_searchable(
    versions: Versions, outcome: Outcome, waiting: dict[str, DocumentAdded], timeout_s: float
) -> None:
    """Wait until each published document is searchable at its new version, or a publish
    ranking after it (the publisher's own, newer) is; what is neither in time stays pending."""
    deadline = time.monotonic() + timeout_s
    while waiting and time.monotonic() < deadline:
        for doc_id, added in list(waiting.items()):
            entry = await versions.entry(added.tenant, added.library, doc_id)
            mine = (added.recut_of or 0, str(added.version))
            if entry == mine:
                outcome.searchable.append(doc_id)
            elif entry is not None and rank(*entry) > rank(*mine):
                outcome.overtaken.append(doc_id)
            else:
                continue
            del waiting[doc_id]
        if waiting:
            await asyncio.sleep(1.0)
    outcome.pending = sorted(waiting)


async def reprocess(
    settings: SearcherSettings, tenant: str, library: str, timeout_s: float
) -> Outcome:
    """Cut every document of a library again with its current profile."""
    topology = settings.bus.topology
    async with connected(settings) as (nc, store):
        name = await store.collections.active()
        documents = await read_documents(store, name, tenant, library) if name else []
        revision = await profile_revision(nc, topology, tenant, library)
        outcome, waiting = await republish(nc, topology, documents, revision)
        log.info("published %d documents of %s/%s again", len(waiting), tenant, library)
        versions = Versions(topology.versions_kv)
        await versions.open(nc.jetstream(), create=False)
        await wait_searchable(versions, outcome, waiting, timeout_s)
        return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kbus_searcher.jobs.reprocess", description=__doc__
    )
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--library", required=True)
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait")
    args = parser.parse_args(argv)
    settings = SearcherSettings()
    configure_logging(settings.process.log_level)
    outcome = asyncio.run(reprocess(settings, args.tenant, args.library, args.timeout))
    print(json.dumps(outcome.__dict__, indent=2))
    return 1 if outcome.pending else 0


if __name__ == "__main__":
    raise SystemExit(main())
