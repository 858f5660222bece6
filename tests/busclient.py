"""A few lines of plain nats-py that any client could write: publish, wait, search."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any

import nats
from kbus_contract.topology import Topology
from nats.aio.client import Client
from nats.aio.msg import Msg


async def connect(url: str) -> Client:
    return await nats.connect(url, max_reconnect_attempts=5)


async def publish_documents(nc: Client, topology: Topology, docs: Iterable[dict[str, Any]]) -> None:
    """Publish documents to their tenant's library's ``document.added`` subject and wait for
    JetStream to store each."""
    js = nc.jetstream()
    for doc in docs:
        await js.publish(
            topology.added(doc["tenant"], doc["library"]),
            json.dumps(doc).encode(),
            headers={"content-type": "application/json"},
        )


class Receipts:
    """Collects ``document.indexed`` receipts; subscribe before publishing."""

    def __init__(self) -> None:
        self.indexed: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._changed = asyncio.Event()

    async def subscribe(self, nc: Client, topology: Topology) -> None:
        await nc.subscribe(topology.document_indexed, cb=self._on_receipt)  # every tenant's

    async def _on_receipt(self, msg: Msg) -> None:
        data = json.loads(msg.data)
        self.indexed[(data["tenant"], data["library"], data["document_id"])] = data
        self._changed.set()

    async def wait_for(self, keys: Iterable[tuple[str, str, str]], timeout_s: float) -> None:
        wanted = set(keys)

        async def until_all() -> None:
            while not wanted <= self.indexed.keys():
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(until_all(), timeout_s)
        except TimeoutError as exc:
            missing = sorted(wanted - self.indexed.keys())
            raise TimeoutError(f"not indexed within {timeout_s}s: {missing}") from exc


async def search(
    nc: Client, topology: Topology, request: dict[str, Any], timeout_s: float = 30.0
) -> dict[str, Any]:
    """Send a search request on its tenant's subject and return the decoded reply."""
    subject = topology.asked("kb.search", request["tenant"])
    reply = await nc.request(subject, json.dumps(request).encode(), timeout=timeout_s)
    result: dict[str, Any] = json.loads(reply.data)
    return result
