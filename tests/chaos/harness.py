"""The chaos run: real servers and services, a paced publisher, and a monkey that kills things.

Services are restarted after each SIGKILL, as Kubernetes would restart a pod. On one node, NATS
is restarted once and Weaviate is stopped for 20 seconds once. On a cluster (three NATS servers,
three Weaviate nodes), the leader of the documents stream is SIGKILLed and Weaviate nodes are
SIGKILLed one at a time, each started again, while searches run at a steady rate. Then the
system drains and the checker runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kbus_client import KbClient
from kbus_contract.topology import Topology
from kbus_dev.cluster import start_nats_cluster, start_weaviate_cluster, urls, weaviate_hosts
from kbus_dev.servers import Server, free_port, start_nats, start_weaviate
from kbus_dev.services import SERVICES, service_env, start_service, wait_healthy
from nats.js import JetStreamContext

from tests.chaos.checker import Findings, check_all, check_index
from tests.chaos.cluster import (
    SearchStats,
    bounce_weaviate_node,
    replicas_missing,
    search_steadily,
)
from tests.chaos.ledger import TENANTS, Event, LedgerDoc, build_ledger
from tests.helpers import TEST_STORAGE, kill_stream_leader

log = logging.getLogger("kbus.chaos")


@dataclass(frozen=True)
class ChaosConfig:
    """How big and how violent a run is."""

    documents: int = 2_000
    #: How long publishing is spread over (the monkey acts during it and a little after).
    publish_seconds: float = 150.0
    kills_per_service: int = 3
    weaviate_outage_s: float = 20.0
    seed: int = 7
    #: The negative control: services ack before processing, so kills lose messages.
    ack_first: bool = False
    drain_timeout_s: float = 900.0
    ack_wait_s: float = 10.0
    #: Three NATS servers and three Weaviate nodes instead of one of each.
    cluster: bool = False
    #: Copies of every stream and of every Weaviate shard on a cluster (1: the negative control).
    replication: int = 3
    #: SIGKILLs of the documents stream's leader (cluster only).
    leader_kills: int = 2
    #: SIGKILLs of a Weaviate node, one at a time, each down this long (cluster only).
    weaviate_kills: int = 2
    weaviate_down_s: float = 15.0
    #: Searches asked per second while documents are published (0: none).
    searches_per_s: float = 0.0
    #: How long the checker waits for Weaviate's repair before it counts what is missing.
    repair_timeout_s: float = 180.0


@dataclass
class ChaosReport:
    """What happened and what the checker found."""

    config: dict[str, Any]
    events: int = 0
    publish_retries: int = 0
    actions: list[str] = field(default_factory=list)
    publish_s: float = 0.0
    drain_s: float = 0.0
    check_s: float = 0.0
    findings: Findings = field(default_factory=Findings)
    searches: SearchStats = field(default_factory=SearchStats)
    #: Per Weaviate node, chunks a read at ALL through it lacked after the repair (cluster).
    missing_at_all: dict[str, int] = field(default_factory=dict)
    #: What a read through one node missed right after the drain, before any repair (cluster).
    before_repair: dict[str, int] = field(default_factory=dict)
    #: Seconds until reads at ALL through every node held every chunk (cluster).
    repair_s: float = 0.0
    #: Seconds until every chunk was its own nearest neighbour again (cluster).
    vectors_repaired_s: float = 0.0
    #: Tenants no live node could read at QUORUM while a Weaviate node was down, summed over
    #: the kills (cluster): what a replica on another node is for.
    tenants_unreadable: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def control(self) -> bool:
        """Whether this run is a negative control (it must show damage)."""
        return bool(self.config["ack_first"]) or (
            bool(self.config["cluster"]) and self.config["replication"] == 1
        )

    def harmed(self) -> bool:
        """Anything lost, doubled, stale or misplaced, or a tenant no live node could read
        while a Weaviate node was down (its data had no other copy)."""
        return any(self.findings.damage().values()) or self.tenants_unreadable > 0

    def as_expected(self) -> bool:
        """A run passes with no damage and only retryable search errors; a negative control
        passes when it shows harm."""
        if self.control:
            return self.harmed()
        return (
            not any(self.findings.damage().values())
            and self.searches.not_retryable == 0
            and self.tenants_unreadable == 0
        )


class Cluster:
    """NATS, Weaviate and the four services, each of which can be killed and brought back."""

    def __init__(self, root: Path, env_extra: dict[str, str], config: ChaosConfig) -> None:
        self.root = root
        self.config = config
        self.nats_port = free_port()
        self.nats: list[Server] = []
        self.weaviate: list[Server] = []
        self.services: dict[str, Server] = {}
        #: Services the monkey holds down on purpose; the supervisor leaves them alone.
        self.held: set[str] = set()
        self.env_extra = env_extra
        self.prefix = f"chaos{uuid.uuid4().hex[:6]}"
        self.collection = "Chaos" + uuid.uuid4().hex[:6]

    @property
    def nats_url(self) -> str:
        return urls(self.nats) if self.config.cluster else f"nats://127.0.0.1:{self.nats_port}"

    def start(self) -> None:
        if self.config.cluster:
            self.nats = start_nats_cluster(self.root / "nats")
            self.weaviate = start_weaviate_cluster(self.root / "weaviate")
        else:
            self.nats = [start_nats(self.root / "nats", self.nats_port)]
            self.weaviate = [start_weaviate(self.root / "weaviate")]
        env = self._env()
        for name in SERVICES:
            self.services[name] = start_service(name, env, self.root / "logs")
        wait_healthy(list(self.services.values()), timeout_s=300)

    def _env(self) -> dict[str, str]:
        extra = {**TEST_STORAGE, "KBUS_STREAM_MAX_BYTES": str(256 * 1024**2), **self.env_extra}
        if self.config.cluster:
            factor = str(self.config.replication)
            extra["KBUS_STREAM_REPLICAS"] = factor
            extra["KBUS_WEAVIATE_REPLICATION_FACTOR"] = factor
            extra["KBUS_WEAVIATE_HOSTS"] = weaviate_hosts(self.weaviate)
        return service_env(
            self.nats_url,
            self.weaviate[0].ports["http"],
            self.weaviate[0].ports["grpc"],
            prefix=self.prefix,
            collection=self.collection,
            extra=extra,
        )

    def kill(self, name: str) -> None:
        if self.services[name].proc.poll() is not None:
            return
        self.services[name].proc.kill()
        self.services[name].proc.wait()

    def revive(self, name: str) -> None:
        if self.services[name].proc.poll() is None:
            return
        port = self.services[name].ports["http"]
        self.services[name] = start_service(name, self._env(), self.root / "logs", port)

    def restart_nats(self) -> None:
        self.nats[0].stop()
        self.nats = [start_nats(self.root / "nats", self.nats_port)]

    def stop_weaviate(self) -> None:
        self.weaviate[0].stop()

    def start_weaviate(self) -> None:
        ports = self.weaviate[0].ports
        self.weaviate = [start_weaviate(self.root / "weaviate", ports=ports)]

    def revive_dead(self) -> list[str]:
        """Restart any service that died on its own (Kubernetes would); names them."""
        dead = [
            n for n, s in self.services.items() if n not in self.held and s.proc.poll() is not None
        ]
        for name in dead:
            self.revive(name)
        return dead

    def stop(self) -> None:
        for server in self.services.values():
            server.stop()
        for infra in (*self.weaviate, *self.nats):
            infra.stop()


#: The services the ledger's documents pass through, which the monkey kills. The generator
#: runs too but carries none of them: its libraries need a chat model, which a chaos run does
#: not start (tests/integration/test_generator.py covers its redelivery and cache).
CARRIERS = tuple(name for name in SERVICES if name != "generator")


def _schedule(config: ChaosConfig, rng: random.Random) -> list[tuple[float, str]]:
    window = config.publish_seconds * 1.2
    actions = [
        (rng.uniform(0.05, 0.95) * window, f"kill:{name}")
        for name in CARRIERS
        for _ in range(config.kills_per_service)
    ]
    if config.cluster:
        # Leaders go at random moments; Weaviate nodes in turn, spread over the window (the
        # monkey takes one node at a time).
        actions += [
            (rng.uniform(0.1, 0.9) * window, "leader:nats") for _ in range(config.leader_kills)
        ]
        actions += [
            ((i + 0.3) / config.weaviate_kills * window, f"node:weaviate{i % 3}")
            for i in range(config.weaviate_kills)
        ]
        return sorted(actions)
    # NATS and Weaviate go down once each, apart from each other.
    actions.append((rng.uniform(0.15, 0.4) * window, "restart:nats"))
    actions.append((rng.uniform(0.55, 0.8) * window, "outage:weaviate"))
    return sorted(actions)


async def _monkey(
    cluster: Cluster, config: ChaosConfig, report: ChaosReport, kb: KbClient, topology: Topology
) -> None:
    """Every action at its own moment; outages and kills may overlap, as they do in life."""
    rng = random.Random(config.seed + 1)
    one_node_at_a_time = asyncio.Lock()

    async def act(at: float, action: str) -> None:
        await asyncio.sleep(at)
        kind, name = action.split(":")
        log.info("chaos: %s", action)
        done = ""
        if kind == "kill":
            cluster.held.add(name)
            cluster.kill(name)
            await asyncio.sleep(rng.uniform(0.5, 3.0))
            cluster.revive(name)
            cluster.held.discard(name)
        elif kind == "leader":
            done = await kill_stream_leader(
                kb.nc, cluster.nats, topology.documents_stream.name, pause_s=1.0
            )
        elif kind == "node":
            async with one_node_at_a_time:
                bounce = await bounce_weaviate_node(
                    cluster.weaviate,
                    int(name.removeprefix("weaviate")),
                    config.weaviate_down_s,
                    cluster.collection,
                    TENANTS,
                )
                report.tenants_unreadable += len(bounce.unreadable)
                done = str(bounce)
        elif kind == "restart":
            await asyncio.to_thread(cluster.restart_nats)
        else:
            cluster.stop_weaviate()
            await asyncio.sleep(config.weaviate_outage_s)
            await asyncio.to_thread(cluster.start_weaviate)
        report.actions.append(f"{at:6.1f}s {action} {done}".rstrip())

    await asyncio.gather(*(act(at, action) for at, action in _schedule(config, rng)))


async def _supervise(cluster: Cluster, report: ChaosReport) -> None:
    """Restart a service that exits on its own (one that cannot reach Weaviate at start-up)."""
    while True:
        for name in cluster.revive_dead():
            report.actions.append(f"supervisor restarted {name}")
        await asyncio.sleep(1.0)


async def _publish(kb: KbClient, events: list[Event], seconds: float, report: ChaosReport) -> None:
    """Publish every event in order at a steady pace, retrying each until the server has it."""
    started = time.monotonic()
    for i, event in enumerate(events):
        await asyncio.sleep(max(0.0, i * seconds / len(events) - (time.monotonic() - started)))
        while True:
            try:
                await _send(kb, event)
                break
            except Exception as exc:  # the server is restarting: the publisher's job is to retry
                report.publish_retries += 1
                log.info("publish retry (%s): %s", type(exc).__name__, exc)
                await asyncio.sleep(0.5)
    report.events = len(events)


async def _send(kb: KbClient, event: Event) -> None:
    doc = event.doc
    if event.version < 0:
        await kb.delete_document(library="chaos", document_id=doc.document_id, tenant=doc.tenant)
        return
    added = doc.added(event.version)
    await kb.publish_document(
        library=added.library,
        document_id=added.document_id,
        title=added.title,
        text=added.text,
        tenant=added.tenant,
        version=added.version,
    )


async def _backlog(js: JetStreamContext, topology: Topology) -> int:
    total = 0
    for stream in topology.work_streams:
        info = await js.stream_info(stream.name)
        total += info.state.messages
    return total


async def _drain(kb: KbClient, cluster: Cluster, topology: Topology, timeout_s: float) -> None:
    """Wait until every work stream is empty and stays empty (nothing nacked for later)."""
    deadline = time.monotonic() + timeout_s
    quiet_since: float | None = None
    said = 0.0
    while time.monotonic() < deadline:
        try:
            backlog = await _backlog(kb.nc.jetstream(timeout=5.0), topology)
        except Exception as exc:  # a server is restarting; ask again
            backlog = -1
            log.info("drain: the backlog is not known yet (%s: %s)", type(exc).__name__, exc)
        if backlog == 0:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since > 8.0:
                return
        else:
            quiet_since = None
        if time.monotonic() - said > 10.0:
            log.info("drain: %d messages in the work streams", backlog)
            said = time.monotonic()
        await asyncio.sleep(1.0)
    raise TimeoutError(f"the pipeline did not drain within {timeout_s:.0f}s")


async def run_chaos(config: ChaosConfig, root: Path) -> ChaosReport:
    """One chaos run from empty servers to the checker's findings."""
    report = ChaosReport(config=asdict(config))
    docs, events = build_ledger(config.documents, config.seed)
    env_extra = {"KBUS_ACK_WAIT_S": str(config.ack_wait_s)}
    if config.ack_first:
        env_extra["KBUS_UNSAFE_ACK_FIRST"] = "true"
    cluster = Cluster(root, env_extra, config)
    await asyncio.to_thread(cluster.start)
    try:
        kb = await KbClient.connect(
            cluster.nats_url,
            prefix=cluster.prefix,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.5,
        )
        try:
            await _run(config, report, cluster, kb, docs, events)
        finally:
            await kb.close()
    finally:
        await asyncio.to_thread(cluster.stop)
    return report


async def _run(
    config: ChaosConfig,
    report: ChaosReport,
    cluster: Cluster,
    kb: KbClient,
    docs: list[LedgerDoc],
    events: list[Event],
) -> None:
    topology = Topology(cluster.prefix)
    started = time.monotonic()
    supervisor = asyncio.create_task(_supervise(cluster, report))
    monkey = asyncio.create_task(_monkey(cluster, config, report, kb, topology))
    searches = None
    if config.searches_per_s > 0:
        load = search_steadily(kb, docs, config.searches_per_s, report.searches, config.seed)
        searches = asyncio.create_task(load)
    await _publish(kb, events, config.publish_seconds, report)
    report.publish_s = time.monotonic() - started
    log.info("published; waiting for the monkey")
    await monkey
    log.info("the monkey is done; draining")
    if searches is not None:
        searches.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await searches
    started = time.monotonic()
    await _drain(kb, cluster, topology, config.drain_timeout_s)
    report.drain_s = time.monotonic() - started
    supervisor.cancel()
    started = time.monotonic()
    if config.cluster:
        await _repair(config, report, cluster, docs)
    report.findings = await check_all(
        docs=docs,
        weaviate_ports=cluster.weaviate[0].ports,
        collection=cluster.collection,
        kb=kb,
        topology=topology,
    )
    report.findings.chunks_missing_at_all = sum(report.missing_at_all.values())
    report.check_s = time.monotonic() - started


async def _repair(
    config: ChaosConfig, report: ChaosReport, cluster: Cluster, docs: list[LedgerDoc]
) -> None:
    """What a read through the first node saw as soon as the pipeline drained (a node that was
    down may not have every write yet), then reads at ALL through every node until all agree
    (Weaviate repairs a replica in the background, and each read at ALL repairs what it reads)."""
    ports = cluster.weaviate[0].ports
    early = await asyncio.to_thread(check_index, ports, cluster.collection, docs)
    report.before_repair = {
        "documents_lost": early.documents_lost,
        "documents_missing_chunks": early.documents_missing_chunks,
        "not_found_by_vector": early.not_found_by_vector,
    }
    started = time.monotonic()
    expected = set().union(*(doc.expected_chunk_ids() for doc in docs))
    report.missing_at_all = await replicas_missing(
        cluster.weaviate, cluster.collection, expected, timeout_s=config.repair_timeout_s
    )
    report.repair_s = time.monotonic() - started
    # A search runs on one replica of each shard: until the one that missed writes has them
    # in its vector index too, a chunk may not be found by its own vector there.
    deadline = time.monotonic() + config.repair_timeout_s
    while early.not_found_by_vector and time.monotonic() < deadline:
        await asyncio.sleep(2.0)
        early = await asyncio.to_thread(check_index, ports, cluster.collection, docs)
    report.vectors_repaired_s = time.monotonic() - started
