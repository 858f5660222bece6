"""The chaos run on a cluster: a steady stream of searches, kills of the work streams' NATS
leader and of Weaviate nodes, and the check that every node, asked at ALL, holds everything."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

import weaviate
from kbus_client import KbClient, KbError
from kbus_dev.cluster import raft_leader, wait_for_weaviate_nodes
from kbus_dev.servers import Server
from weaviate.classes.config import ConsistencyLevel

from tests.chaos.ledger import LIBRARY, LedgerDoc

#: How long a search may take before it counts as unanswered (the searcher's own bound is the
#: budget the client gives it).
SEARCH_WAIT_S = 10.0


@dataclass
class SearchStats:
    """What the steady searches saw."""

    asked: int = 0
    answered: int = 0
    #: Error replies (and requests nothing answered) by code.
    errors: dict[str, int] = field(default_factory=dict)
    #: Errors that did not say the search may be asked again: each is a defect.
    not_retryable: int = 0
    #: The longest time between two successful answers, seconds.
    longest_gap_s: float = 0.0


async def search_steadily(
    kb: KbClient, docs: list[LedgerDoc], per_s: float, stats: SearchStats, seed: int
) -> None:
    """Ask one search every ``1 / per_s`` seconds (each on its own, so a slow one does not
    hold the next back) until cancelled."""
    rng = random.Random(seed)
    last_ok = time.monotonic()
    pending: set[asyncio.Task[None]] = set()

    async def one(doc: LedgerDoc) -> None:
        nonlocal last_ok
        stats.asked += 1
        try:
            await kb.search(
                doc.token, libraries=[LIBRARY], tenant=doc.tenant, timeout_s=SEARCH_WAIT_S
            )
        except KbError as exc:
            stats.errors[exc.code] = stats.errors.get(exc.code, 0) + 1
            stats.not_retryable += not exc.retryable
            return
        now = time.monotonic()
        stats.answered += 1
        stats.longest_gap_s = max(stats.longest_gap_s, now - last_ok)
        last_ok = now

    try:
        while True:
            task = asyncio.create_task(one(rng.choice(docs)))
            pending.add(task)
            task.add_done_callback(pending.discard)
            await asyncio.sleep(1.0 / per_s)
    finally:
        for task in pending:
            task.cancel()
        stats.longest_gap_s = max(stats.longest_gap_s, time.monotonic() - last_ok)


async def bounce_weaviate_node(nodes: list[Server], index: int, down_s: float) -> str:
    """SIGKILL one Weaviate node, keep it down ``down_s``, start it again and wait until the
    cluster has all its nodes back; names the node and whether it led the schema's Raft."""
    victim = nodes[index]
    others = [n for n in nodes if n is not victim]
    leader = await asyncio.to_thread(raft_leader, others[0])
    name = (victim.env or {}).get("CLUSTER_HOSTNAME", f"node{index + 1}")
    victim.kill()
    await asyncio.sleep(down_s)
    victim.restart()
    await asyncio.to_thread(wait_for_weaviate_nodes, nodes, len(nodes), 300.0)
    return name + (" (the Raft leader)" if leader == name else "")


def uuids_at_all(node: Server, collection: str) -> set[str]:
    """Every chunk's id, read through ``node`` at consistency ALL (every replica answers)."""
    client: Any = weaviate.connect_to_local(
        port=node.ports["http"], grpc_port=node.ports["grpc"], skip_init_checks=True
    )
    try:
        alias = client.alias.get(alias_name=collection)
        col = client.collections.use(alias.collection if alias else collection)
        ids: set[str] = set()
        for tenant in col.tenants.get():
            handle = col.with_tenant(tenant).with_consistency_level(ConsistencyLevel.ALL)
            ids.update(str(obj.uuid) for obj in handle.iterator(return_properties=[]))
        return ids
    finally:
        client.close()


async def replicas_missing(
    nodes: list[Server], collection: str, expected: set[str], timeout_s: float
) -> dict[str, int]:
    """Per node, how many expected chunks a read at ALL through it lacks, once Weaviate's
    repair had ``timeout_s`` to bring every replica up to date (0 everywhere is the goal)."""
    deadline = time.monotonic() + timeout_s
    while True:
        missing: dict[str, int] = {}
        for node in nodes:
            name = (node.env or {}).get("CLUSTER_HOSTNAME", node.name)
            try:
                missing[name] = len(
                    expected - await asyncio.to_thread(uuids_at_all, node, collection)
                )
            except Exception:  # a replica did not answer at ALL yet
                missing[name] = len(expected)
        if not any(missing.values()) or time.monotonic() > deadline:
            return missing
        await asyncio.sleep(2.0)
