"""The chaos run on a cluster: kills of the leader of each stream and bucket,
kills of Weaviate nodes (the schema's Raft leader among them), and the check that every node,
asked at ALL, holds everything."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

import weaviate
from kbus_dev.cluster import raft_leader, wait_for_weaviate_nodes
from kbus_dev.servers import Server
from nats.aio.client import Client
from nats.errors import Error as NatsError
from weaviate.classes.config import ConsistencyLevel

from tests.helpers import kill_stream_leader


async def kill_next_leader(nc: Client, servers: list[Server], killed: set[str]) -> str:
    """SIGKILL the NATS server leading the first stream, in name order, whose leader has not
    been killed yet (round and round once all have): kbus's streams and its key-value buckets
    (``KV_*``), as the server lists them now; start it again a second later. Names both."""
    streams = sorted(await stream_names(nc))
    fresh = [name for name in streams if name not in killed] or streams
    stream = fresh[0]
    killed.add(stream)
    server = await kill_stream_leader(nc, servers, stream, pause_s=1.0)
    return f"{stream} led by {server}"


async def stream_names(nc: Client, timeout_s: float = 60.0) -> list[str]:
    """Every stream's name, asked again while the JetStream API does not answer (right after
    another kill, its meta leader may be moving)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return [str(i.config.name) for i in await nc.jetstream(timeout=5.0).streams_info()]
        except NatsError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1.0)


#: How long after a node's kill the tenant reads start to count: the cluster first notices the
#: node is gone (and elects a new schema leader if it led).
SETTLE_S = 4.0


@dataclass
class NodeBounce:
    """One Weaviate node's kill: which node, and the tenants no live node could read while it
    was down (each tenant read at QUORUM through the live nodes, again and again, from
    ``SETTLE_S`` after the kill until the restart)."""

    node: str
    raft_leader: bool
    unreadable: list[str]

    def __str__(self) -> str:
        lead = " (the Raft leader)" if self.raft_leader else ""
        return f"{self.node}{lead}; tenants unreadable while down: {len(self.unreadable)}"


async def bounce_weaviate_node(
    nodes: list[Server],
    turn: int,
    down_s: float,
    collection: str,
    tenants: tuple[str, ...],
    *,
    raft_leader_first: bool,
) -> NodeBounce:
    """SIGKILL a Weaviate node, keep it down ``down_s``, reading each tenant through the
    others, then start it again and wait until the cluster has all its nodes back. The node is
    the schema's Raft leader with ``raft_leader_first``, else the one holding the most shards
    (of equals, the first from ``turn`` on)."""
    turn %= len(nodes)
    leader = await asyncio.to_thread(raft_leader, nodes[turn])
    victim = next((node for node in nodes if _name(node) == leader), None)
    if victim is None or not raft_leader_first:
        victim = await asyncio.to_thread(_fullest, nodes[turn:] + nodes[:turn])
    others = [n for n in nodes if n is not victim]
    name = _name(victim)
    victim.kill()
    await asyncio.sleep(SETTLE_S)
    deadline = time.monotonic() + max(0.0, down_s - SETTLE_S)
    readable: set[str] = set()
    while time.monotonic() < deadline and len(readable) < len(tenants):
        for tenant in set(tenants) - readable:
            if await asyncio.to_thread(_readable, others, collection, tenant):
                readable.add(tenant)
        await asyncio.sleep(0.5)
    await asyncio.sleep(max(0.0, deadline - time.monotonic()))
    victim.restart()
    await asyncio.to_thread(wait_for_weaviate_nodes, nodes, len(nodes), 300.0)
    unreadable = sorted(set(tenants) - readable)
    return NodeBounce(name, leader == name, unreadable)


def _name(node: Server) -> str:
    return (node.env or {}).get("CLUSTER_HOSTNAME", node.name)


def _fullest(nodes: list[Server]) -> Server:
    """The node holding the most shards (with three copies every node holds every shard; with
    one, killing an empty node would show nothing)."""
    url = f"http://127.0.0.1:{nodes[0].ports['http']}/v1/nodes?output=verbose"
    with urllib.request.urlopen(url, timeout=10) as reply:
        listed = json.load(reply)["nodes"]
    shards = {node["name"]: len(node.get("shards") or []) for node in listed}
    return max(nodes, key=lambda node: shards.get(_name(node), 0))


def _readable(nodes: list[Server], collection: str, tenant: str) -> bool:
    """Whether one of ``nodes`` reads an object of ``tenant`` at QUORUM."""
    for node in nodes:
        client: Any = weaviate.connect_to_local(
            port=node.ports["http"], grpc_port=node.ports["grpc"], skip_init_checks=True
        )
        try:
            alias = client.alias.get(alias_name=collection)
            col = client.collections.use(alias.collection if alias else collection)
            col = col.with_tenant(tenant)
            handle = col.with_consistency_level(ConsistencyLevel.QUORUM)
            if handle.query.fetch_objects(limit=1, return_properties=[]).objects:
                return True
        except Exception:  # a replica this tenant needs is down
            continue
        finally:
            client.close()
    return False


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
