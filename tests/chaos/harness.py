"""The chaos run: real servers and services, a paced publisher, and a monkey that kills things.

Every stage runs ``replicas`` processes (the searcher as an indexer and a query searcher); a
SIGKILLed replica is restarted, as Kubernetes would restart a pod. On one node, NATS is restarted
once and Weaviate is stopped for 20 seconds once. On a cluster (three NATS servers, three
Weaviate nodes), the leader of each stream and bucket in turn is SIGKILLed, and
Weaviate nodes are SIGKILLed one at a time (the schema's Raft leader first), each started again;
then, if asked, every stage is restarted replica by replica. Searches run at a steady rate from
several clients the whole time. Then the system drains and the checker runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kbus_client import KbClient, Retry
from kbus_contract import SyncEntry
from kbus_contract.topology import Topology
from nats.js import JetStreamContext

from tests.chaos.checker import Findings, check_all, check_index
from tests.chaos.cluster import replicas_missing
from tests.chaos.ledger import LIBRARY, SOURCE, TENANTS, Event, LedgerDoc, build_ledger
from tests.chaos.load import (
    Published,
    SearchStats,
    SteadySearches,
    quiet_receipts,
    receipt_delays,
    searches_for,
)
from tests.chaos.monkey import Monkey, RollingRestart
from tests.chaos.processes import Cluster

log = logging.getLogger("kbus.chaos")


@dataclass(frozen=True)
class ChaosConfig:
    """How big and how violent a run is."""

    documents: int = 2_000
    #: How long publishing is spread over (the monkey acts during it and a little after).
    publish_seconds: float = 150.0
    kills_per_service: int = 3
    weaviate_outage_s: float = 20.0
    #: On one node: NATS restarted and Weaviate stopped, once each, besides the kills.
    outages: bool = True
    seed: int = 7
    #: The negative control: services ack before processing, so kills lose messages.
    ack_first: bool = False
    drain_timeout_s: float = 900.0
    ack_wait_s: float = 10.0
    #: Three NATS servers and three Weaviate nodes instead of one of each.
    cluster: bool = False
    #: Copies of every stream and of every Weaviate shard on a cluster (1: the negative control).
    replication: int = 3
    #: Processes of every stage (the searcher as an indexer and a query searcher).
    replicas: int = 1
    #: Query searchers, if not ``replicas`` (1 on a cluster: the searches' negative control).
    query_replicas: int = 0
    #: SIGKILLs of a stream's leader, each of a stream or key-value bucket whose leader was
    #: not killed yet, in name order (cluster only); -1: one of every stream and bucket that
    #: exists when the run starts.
    leader_kills: int = -1
    #: SIGKILLs of a Weaviate node, one at a time, each down this long (cluster only).
    weaviate_kills: int = 2
    weaviate_down_s: float = 15.0
    #: A query replica SIGKILLed and, while it is down, a NATS server (a stream's leader):
    #: the overlap that failed searches in earlier runs, this many times on purpose (cluster
    #: only).
    overlaps: int = 0
    #: The first Weaviate node killed is the schema's Raft leader (else the fullest node).
    raft_leader_first: bool = True
    #: Searches asked per second while documents are published (0: none), over this many
    #: client connections; then as long again with nothing failing, for reference.
    searches_per_s: float = 0.0
    search_clients: int = 3
    #: The no-retry control's own rate (0: one retrying client's share of ``searches_per_s``).
    control_searches_per_s: float = 0.0
    idle_search_s: float = 20.0
    #: Stages the monkey kills (comma-separated; empty: every stage documents pass through).
    kill_stages: str = ""
    #: Every stage restarted replica by replica after the other actions (cluster only).
    rolling_restart: bool = False
    #: How long the checker waits for Weaviate's repair before it counts what is missing.
    repair_timeout_s: float = 180.0
    #: Documents published one at a time before the monkey starts: publish-to-receipt with
    #: nothing failing, the figure beside ``receipts``.
    quiet_documents: int = 10


#: The longest stretch without an answer a cluster run may show (docs/reliability.md).
SEARCH_GAP_TARGET_S = 3.0
#: The share of searches a cluster run must answer.
ANSWERED_TARGET = 0.999


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
    #: The negative control beside them, through the same failures: a client that sends each
    #: search once (``retry=None``), at the same rate.
    searches_without_retry: SearchStats = field(default_factory=SearchStats)
    #: The same searches afterwards, with nothing failing.
    searches_idle: SearchStats = field(default_factory=SearchStats)
    rolling_restart: RollingRestart = field(default_factory=RollingRestart)
    #: Publish-to-receipt times of the versions that were indexed.
    receipts: dict[str, float] = field(default_factory=dict)
    #: The same on the same servers before anything failed, one document at a time.
    quiet_receipts: dict[str, float] = field(default_factory=dict)
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
        report = asdict(self)
        report["search_summary"] = {
            "during": self.searches.summary(),
            "idle": self.searches_idle.summary(),
            "targets": self.search_targets(),
            "without_retry": self.searches_without_retry.summary(),
            "without_retry_misses_a_target": self.control_misses(),
        }
        return report

    @property
    def control(self) -> bool:
        """Whether this run is a negative control of damage (it must show some)."""
        return bool(self.config["ack_first"]) or (
            bool(self.config["cluster"]) and self.config["replication"] == 1
        )

    @property
    def search_control(self) -> bool:
        """Whether this run is a negative control of the searches (it must miss a target):
        one query searcher on a cluster."""
        one = self.config["query_replicas"] == 1 or (
            self.config["replicas"] == 1 and not self.config["query_replicas"]
        )
        return bool(self.config["cluster"]) and one

    def search_targets(self, searches: SearchStats | None = None) -> dict[str, bool]:
        """docs/reliability.md's targets for searches during a run."""
        searches = searches or self.searches
        return {
            "answered >= 99.9%": searches.answered_share >= ANSWERED_TARGET,
            "longest gap <= 3 s": searches.longest_gap_s <= SEARCH_GAP_TARGET_S,
            "no failure during the rolling restart": self.rolling_restart.failed == 0,
        }

    def control_misses(self) -> bool:
        """Whether the client without retries, through the same failures, missed a target
        (else the targets prove nothing)."""
        return not all(self.search_targets(self.searches_without_retry).values())

    def harmed(self) -> bool:
        """Anything lost, doubled, stale or misplaced, or a tenant no live node could read
        while a Weaviate node was down (its data had no other copy)."""
        return any(self.findings.damage().values()) or self.tenants_unreadable > 0

    def as_expected(self) -> bool:
        """A run passes with no damage and only retryable search errors, and, when searches
        ran on a cluster, the search targets met; a negative control passes when it shows
        harm, or misses a search target."""
        if self.control:
            return self.harmed()
        searched = bool(self.config["cluster"]) and self.searches.asked > 0
        if searched and self.search_control:
            return not all(self.search_targets().values())
        return (
            not any(self.findings.damage().values())
            and self.searches.not_retryable == 0
            and self.tenants_unreadable == 0
            and (not searched or all(self.search_targets().values()))
            and (not searched or self.control_misses())
        )


async def _supervise(cluster: Cluster, report: ChaosReport) -> None:
    """Restart a service that exits on its own (one that cannot reach Weaviate at start-up)."""
    while True:
        for name in cluster.revive_dead():
            report.actions.append(f"supervisor restarted {name}")
        await asyncio.sleep(1.0)


async def _publish(
    kb: KbClient, events: list[Event], seconds: float, report: ChaosReport, published: Published
) -> None:
    """Publish every event in order at a steady pace, retrying each until the server has it."""
    started = time.monotonic()
    for i, event in enumerate(events):
        await asyncio.sleep(max(0.0, i * seconds / len(events) - (time.monotonic() - started)))
        while True:
            try:
                await _send(kb, event, published)
                break
            except Exception as exc:  # the server is restarting: the publisher's job is to retry
                report.publish_retries += 1
                log.info("publish retry (%s): %s", type(exc).__name__, exc)
                await asyncio.sleep(0.5)
    report.events = len(events)


async def _send(kb: KbClient, event: Event, published: Published) -> None:
    doc = event.doc
    if doc is None:
        entries = [SyncEntry(document_id=i, version=v) for i, v in event.listed]
        # A short wait: the check reads the store, not the receipt's counts.
        await kb.publish_sync(LIBRARY, entries, source=SOURCE, tenant=event.tenant, settle_s=5)
        return
    if event.version < 0:
        await kb.delete_document(library=LIBRARY, document_id=doc.document_id, tenant=doc.tenant)
        return
    added = doc.added(event.version)
    published.mark(added.tenant, added.document_id, added.version or "")
    await kb.publish_document(
        library=added.library,
        document_id=added.document_id,
        title=added.title,
        text=added.text,
        tenant=added.tenant,
        version=added.version,
        source=added.source,
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
    env_extra = {"KBUS_ACK_WAIT_S": str(config.ack_wait_s)}
    cluster = Cluster(root, env_extra, config)
    clients: list[KbClient] = []
    try:
        # Inside: what started of a cluster that failed to start is stopped too.
        await asyncio.to_thread(cluster.start)
        # The last one sends each search once: the control beside the others.
        for retry in [Retry()] * max(1, config.search_clients) + [None]:
            clients.append(
                await KbClient.connect(
                    cluster.nats_url,
                    prefix=cluster.prefix,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=0.5,
                    retry=retry,
                )
            )
        await _run(config, report, cluster, clients)
    finally:
        for kb in clients:
            await kb.close()
        await asyncio.to_thread(cluster.stop)
    return report


async def _run(
    config: ChaosConfig, report: ChaosReport, cluster: Cluster, clients: list[KbClient]
) -> None:
    kb = clients[0]
    docs, events = build_ledger(config.documents, config.seed)
    topology = Topology(cluster.prefix)
    published = Published()
    if config.quiet_documents:
        report.quiet_receipts = await quiet_receipts(kb, config.quiet_documents, TENANTS[0])
    started = time.monotonic()
    supervisor = asyncio.create_task(_supervise(cluster, report))
    searches = _search(config, report, clients, docs)
    publishing = asyncio.create_task(
        _publish(kb, events, config.publish_seconds, report, published)
    )
    monkey = asyncio.create_task(Monkey(cluster, config, report, kb).run(publishing))
    await publishing
    report.publish_s = time.monotonic() - started
    log.info("published; waiting for the monkey")
    await monkey
    log.info("the monkey is done; draining")
    for task in searches:
        task.cancel()
    await asyncio.gather(*searches, return_exceptions=True)
    started = time.monotonic()
    await _drain(kb, cluster, topology, config.drain_timeout_s)
    report.drain_s = time.monotonic() - started
    supervisor.cancel()
    await _settle(config, report, cluster, clients, docs, topology, published)


def _search(
    config: ChaosConfig, report: ChaosReport, clients: list[KbClient], docs: list[LedgerDoc]
) -> list[asyncio.Task[None]]:
    """The steady searches through the retrying clients, and the control beside them: the
    last client, which sends each search once, at the rate of one of the others."""
    if config.searches_per_s <= 0:
        return []
    retrying, control = clients[:-1], clients[-1:]
    per_client = config.control_searches_per_s or config.searches_per_s / len(retrying)
    return [
        asyncio.create_task(
            SteadySearches(retrying, docs, config.seed).run(config.searches_per_s, report.searches)
        ),
        asyncio.create_task(
            SteadySearches(control, docs, config.seed + 3).run(
                per_client, report.searches_without_retry
            )
        ),
    ]


async def _settle(
    config: ChaosConfig,
    report: ChaosReport,
    cluster: Cluster,
    clients: list[KbClient],
    docs: list[LedgerDoc],
    topology: Topology,
    published: Published,
) -> None:
    """After the drain: the idle searches, the receipts' delays, the repair and the check."""
    if config.searches_per_s > 0:
        report.searches_idle = await searches_for(
            clients[:-1], docs, config.searches_per_s, config.idle_search_s, config.seed + 2
        )
    kb = clients[0]
    report.receipts = await receipt_delays(kb.nc.jetstream(timeout=10.0), topology, published)
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
