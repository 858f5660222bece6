"""A publish waits for its receipt while its document keeps progressing, and only as long as
``timeout_s`` without a sign of it: the indexer's ``document.progress`` (one per stored part of
a large document) pushes the wait on. Here the test sends what the indexer would, on a real
NATS, at random paces, each part well within the timeout and the whole well past it."""

from __future__ import annotations

import asyncio
import random

import pytest
from kbus_client import KbClient
from kbus_contract import DocumentAdded, DocumentIndexed, DocumentProgress, FeedReply
from kbus_contract.tenancy import grant_token
from kbus_contract.topology import Topology
from nats.aio.client import Client
from nats.aio.msg import Msg

TIMEOUT_S = 1.0


async def _indexer(nc: Client, topology: Topology, doc: str, parts: int, pace_s: float) -> None:
    """What the indexer tells of a document of ``parts`` parts, one every ``pace_s``."""
    version = "v1"
    for part in range(1, parts + 1):
        await asyncio.sleep(pace_s)
        told = DocumentProgress(
            tenant="acme",
            library="big",
            document_id=doc,
            version=version,
            indexed=part * 64,
            total=parts * 64,
        )
        await nc.publish(topology.progress("acme", "big"), told.model_dump_json().encode())
    receipt = DocumentIndexed(
        tenant="acme",
        library="big",
        document_id=doc,
        version=version,
        chunk_count=parts * 64,
        model="m",
    )
    await nc.publish(topology.indexed_of("acme", "big"), receipt.model_dump_json().encode())


async def test_a_wait_lasts_while_the_document_progresses_and_not_without(
    nc: Client, topology: Topology
) -> None:
    rng = random.Random(71)
    kb = KbClient(nc, prefix=topology.prefix, tenant="acme")
    watcher = kb._receipts  # the client's one watcher of receipts, as publish_document uses it
    for n in range(3):
        pace = rng.uniform(0.2, 0.4) * TIMEOUT_S
        parts = rng.randint(6, 10)  # the whole takes 1.2 to 4 times the timeout
        doc = f"long-{n}"
        waiting = await watcher.expect_receipt(_added(doc))
        telling = asyncio.create_task(_indexer(nc, topology, doc, parts, pace))
        receipt = await watcher.wait(waiting, TIMEOUT_S)
        await telling
        assert receipt.chunk_count == parts * 64
        watcher.forget(waiting)
    # Before it gives up, a wait reads what kbus stored (kb.feed): a stand-in store holding
    # nothing for the silent document.
    empty = FeedReply(tenant="acme", entries=(), last=0, more=False).model_dump_json().encode()

    async def nothing_stored(msg: Msg) -> None:
        await msg.respond(empty)

    for restricted in (False, True):
        asked = topology.asked("kb.feed", "acme", grant_token(None), restricted)
        await nc.subscribe(asked, cb=nothing_stored)
    silent = await watcher.expect_receipt(_added("silent"))
    with pytest.raises(TimeoutError, match="no progress for 1 s"):
        await watcher.wait(silent, TIMEOUT_S)


def _added(doc: str) -> DocumentAdded:
    return DocumentAdded(
        tenant="acme", library="big", document_id=doc, title=doc, text="x", version="v1"
    )
