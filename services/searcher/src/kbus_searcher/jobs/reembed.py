"""Switch an index to another embedding model: re-embed everything, then switch searches over.

``python -m kbus_searcher.jobs.reembed``, after the embedders were redeployed with the new model:

1. Ask the embedders (``kb.embed``) which model they run. Its vectors go to that model's own
   collection; searches keep reading the current one, and a query the new model embeds is
   refused there (``model_mismatch``), never answered with the old vectors.
2. Publish every document of the current collection that the new one lacks on ``chunks.ready``,
   exactly as the ingestor made it (ids, text, headings, keyword text, publish sequence): the
   embedders embed it, the indexer writes it. Nothing is re-parsed and no source is needed.
3. Wait until every document is complete in the new collection, once more for documents that
   were in flight, then move the alias: from that moment searches read the new vectors.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import time

from kbus_contract import (
    ChunksReady,
    EmbedReply,
    EmbedRequest,
    InputType,
)
from kbus_contract.tenancy import UNKNOWN
from kbus_contract.topology import Topology
from kbus_contract.wire import request
from kbus_runtime.bus import JSON_HEADERS
from kbus_runtime.logs import configure_logging
from nats.aio.client import Client

from kbus_searcher.jobs.stored import StoredDocument, connected, read_documents
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.store import ChunkStore

log = logging.getLogger("kbus.reembed")

PART_CHUNKS = 64


async def running_model(nc: Client, topology: Topology) -> str:
    """The model the embedders run now."""
    probe = EmbedRequest(texts=("model probe",), input_type=InputType.QUERY)
    reply = await request(
        nc,
        topology.subject("kb.embed", tenant=UNKNOWN),
        probe,
        EmbedReply,
        stage="embedder",
        timeout_s=60,
    )
    return reply.model


async def _complete(store: ChunkStore, name: str, document: StoredDocument) -> bool:
    ref = document.ref
    stored = await store.writes.count_publish(
        name, ref.tenant, ref.library, ref.document_id, ref.version, ref.sequence
    )
    return stored >= len(document.chunks)


async def _publish(nc: Client, topology: Topology, document: StoredDocument) -> None:
    whole = ChunksReady(
        document=document.ref, total_chunks=len(document.chunks), chunks=tuple(document.chunks)
    )
    for part in whole.split(PART_CHUNKS):
        await nc.jetstream().publish(
            topology.of_document("chunks.ready", part.document),
            part.model_dump_json().encode(),
            headers=JSON_HEADERS,
        )


async def copy_missing(
    nc: Client, topology: Topology, store: ChunkStore, source: str, target: str, deadline: float
) -> int:
    """One pass: publish what the target lacks and wait until it holds it. Returns the count."""
    pending = [
        d for d in await read_documents(store, source) if not await _complete(store, target, d)
    ]
    for document in pending:
        await _publish(nc, topology, document)
    published = len(pending)
    log.info("re-embedding %d documents into %s", published, target)
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(pending)} documents were not re-embedded in time")
        await asyncio.sleep(1.0)
        pending = [d for d in pending if not await _complete(store, target, d)]
        still = {(d.ref.tenant, d.ref.library, d.ref.document_id) for d in pending}
        if still:  # a document deleted meanwhile is no longer waited for
            current = {
                (d.ref.tenant, d.ref.library, d.ref.document_id)
                for d in await read_documents(store, source)
            }
            pending = [
                d for d in pending if (d.ref.tenant, d.ref.library, d.ref.document_id) in current
            ]
    return published


async def reembed(settings: SearcherSettings, timeout_s: float) -> str:
    """Re-embed the active collection with the running model and switch; returns the target."""
    topology = settings.bus.topology
    async with connected(settings) as (nc, store):
        await store.collections.ensure()
        model = await running_model(nc, topology)
        target = store.collections.physical(model)
        source = await store.collections.active()
        if source is None or source == target:
            log.info("nothing to re-embed: searches read %s, made by %s", source, model)
            return target
        deadline = time.monotonic() + timeout_s
        copied = await copy_missing(nc, topology, store, source, target, deadline)
        # Documents that the old model's embedders were still finishing while we copied.
        copied += await copy_missing(nc, topology, store, source, target, deadline)
        await store.collections.switch_to(target)
        log.info(
            "switched %s from %s to %s (%d documents re-embedded)",
            store.collections.alias,
            source,
            target,
            copied,
        )
        return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kbus_searcher.jobs.reembed", description=__doc__
    )
    parser.add_argument("--timeout", type=float, default=24 * 3600.0, help="seconds to wait")
    args = parser.parse_args(argv)
    settings = SearcherSettings()
    configure_logging(settings.process.log_level)
    asyncio.run(reembed(settings, args.timeout))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
