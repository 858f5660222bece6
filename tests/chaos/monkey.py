"""The monkey: every action at its own moment (kills of replicas, stream leaders, Weaviate
nodes, outages), then, when asked, a rolling restart of every stage while the load goes on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx
from kbus_client import KbClient
from kbus_dev.cluster import wait_for_meta_leader
from kbus_dev.services import STAGES

from tests.chaos.cluster import bounce_weaviate_node, kill_next_leader, stream_names
from tests.chaos.ledger import TENANTS
from tests.chaos.load import SEARCH_WAIT_S, SearchStats

if TYPE_CHECKING:
    from tests.chaos.harness import ChaosConfig, ChaosReport
    from tests.chaos.processes import Cluster

log = logging.getLogger("kbus.chaos")

#: Seconds a killed replica may take to answer ``/health`` again (a model to load, a start-up
#: during an election that exits and is restarted by the supervisor).
BACK_WITHIN_S = 300.0

#: The stages the ledger's documents pass through, which the monkey kills. The generator runs
#: too but carries none of them: its libraries need a chat model, which a chaos run does not
#: start (tests/integration/test_generation.py covers its redelivery and cache).
CARRIERS = tuple(stage for stage in STAGES if stage != "generator")


@dataclass
class RollingRestart:
    """What the searches saw while every stage was replaced replica by replica."""

    replaced: list[str] = field(default_factory=list)
    seconds: float = 0.0
    asked: int = 0
    failed: int = 0
    #: Whether documents were still being published when it ended.
    under_publishing: bool = False


def schedule(config: ChaosConfig, rng: random.Random, streams: int = 0) -> list[tuple[float, str]]:
    """(moment, action) pairs over the publishing window and a little after; ``streams``: how
    many streams and buckets exist (a leader kill of each, unless the run names a
    count)."""
    window = config.publish_seconds * 1.2
    stages = config.kill_stages.split(",") if config.kill_stages else CARRIERS
    actions = [
        (rng.uniform(0.05, 0.95) * window, f"kill:{stage}")
        for stage in stages
        for _ in range(config.kills_per_service)
    ]
    if config.cluster:
        # Leaders go at random moments, a different stream (or bucket, or store) each time;
        # Weaviate nodes in turn, spread over the window, the Raft leader first.
        kills = streams if config.leader_kills < 0 else config.leader_kills
        actions += [(rng.uniform(0.1, 0.9) * window, f"leader:{i}") for i in range(kills)]
        actions += [
            ((i + 0.3) / config.weaviate_kills * window, f"node:{i}")
            for i in range(config.weaviate_kills)
        ]
        actions += [
            ((i + 0.6) / config.overlaps * window, f"overlap:{i}") for i in range(config.overlaps)
        ]
        return sorted(actions)
    # NATS and Weaviate go down once each, apart from each other.
    if config.outages:
        actions.append((rng.uniform(0.15, 0.4) * window, "restart:nats"))
        actions.append((rng.uniform(0.55, 0.8) * window, "outage:weaviate"))
    return sorted(actions)


class Monkey:
    """Acts on the cluster; says what it did in the report."""

    def __init__(
        self, cluster: Cluster, config: ChaosConfig, report: ChaosReport, kb: KbClient
    ) -> None:
        self.cluster = cluster
        self.config = config
        self.report = report
        self.kb = kb
        self.rng = random.Random(config.seed + 1)
        self.one_node_at_a_time = asyncio.Lock()
        #: Three NATS servers keep a majority through one loss: the next leader kill waits
        #: until the server killed before is back and current (two down at once is an
        #: outage no copy count covers).
        self.one_server_at_a_time = asyncio.Lock()
        #: Two replicas cover one failure: a stage's next kill waits until the replica killed
        #: before answers again (its kills may still overlap other stages' and every leader's).
        self.one_replica_at_a_time: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        #: Streams whose leader was killed, so each kill takes another.
        self.leaders_killed: set[str] = set()

    async def run(self, publishing: asyncio.Task[None]) -> None:
        """Every scheduled action (they may overlap, as they do in life), then the rolling
        restart if the run asks for one."""
        streams = len(await stream_names(self.kb.nc)) if self.config.cluster else 0
        actions = schedule(self.config, self.rng, streams)
        await asyncio.gather(*(self._at(at, action) for at, action in actions))
        if self.config.rolling_restart:
            await self.roll(publishing)

    async def _at(self, at: float, action: str) -> None:
        await asyncio.sleep(at)
        kind, name = action.split(":")
        log.info("chaos: %s", action)
        done = await getattr(self, f"_{kind}")(name) or ""
        self.report.actions.append(f"{at:6.1f}s {action} {done}".rstrip())

    async def _kill(self, stage: str) -> str:
        if self.cluster.replicas(stage) == 1:  # the only one: its outage is the point
            return await self._kill_once(stage)
        async with self.one_replica_at_a_time[stage]:
            label = await self._kill_once(stage)
            return f"{label}, back in {await self._back(label):.1f} s"

    async def _kill_once(self, stage: str) -> str:
        label = self.cluster.next_victim(stage)
        self.cluster.held.add(label)
        self.cluster.kill(label)
        await asyncio.sleep(self.rng.uniform(0.5, 3.0))
        await asyncio.to_thread(self.cluster.revive, label)
        self.cluster.held.discard(label)
        return label

    async def _back(self, label: str) -> float:
        """Seconds until ``label`` answers ``/health`` (restarted by the supervisor if it exits
        on the way: the same port)."""
        started = time.monotonic()
        url = f"http://127.0.0.1:{self.cluster.services[label].ports['http']}/health"
        async with httpx.AsyncClient(timeout=1.0) as http:
            while time.monotonic() - started < BACK_WITHIN_S:
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(url)).status_code < 300:
                        break
                await asyncio.sleep(0.5)
        return time.monotonic() - started

    async def _leader(self, _: str) -> str:
        async with self.one_server_at_a_time:
            killed = await kill_next_leader(self.kb.nc, self.cluster.nats, self.leaders_killed)
            await asyncio.to_thread(wait_for_meta_leader, self.cluster.nats)
        return killed

    async def _overlap(self, _: str) -> str:
        """A query replica killed and, while it is down, a NATS server: the searches the
        replica left answer through the other, whose connection may be the one lost."""
        async with self.one_replica_at_a_time["query"]:
            label = self.cluster.next_victim("query")
            self.cluster.held.add(label)
            self.cluster.kill(label)
            await asyncio.sleep(self.rng.uniform(0.2, 1.0))
            killed = await self._leader("")
            await asyncio.to_thread(self.cluster.revive, label)
            self.cluster.held.discard(label)
            back = await self._back(label)
        return f"{label} down, then the server of {killed}; {label} back in {back:.1f} s"

    async def _node(self, turn: str) -> str:
        async with self.one_node_at_a_time:
            bounce = await bounce_weaviate_node(
                self.cluster.weaviate,
                int(turn),
                self.config.weaviate_down_s,
                self.cluster.collection,
                TENANTS,
                raft_leader_first=self.config.raft_leader_first and turn == "0",
            )
        self.report.tenants_unreadable += len(bounce.unreadable)
        return str(bounce)

    async def _restart(self, _: str) -> str:
        await asyncio.to_thread(self.cluster.restart_nats)
        return ""

    async def _outage(self, _: str) -> str:
        self.cluster.stop_weaviate()
        await asyncio.sleep(self.config.weaviate_outage_s)
        await asyncio.to_thread(self.cluster.start_weaviate)
        return ""

    async def roll(self, publishing: asyncio.Task[None]) -> None:
        """Replace every replica of every stage, one at a time, as ``kubectl rollout restart``
        does with maxUnavailable 0: the new one healthy first, then SIGTERM to the old."""
        rolled = self.report.rolling_restart
        searches: SearchStats = self.report.searches
        asked = searches.asked
        started = time.monotonic()
        log.info("chaos: rolling restart of every stage")
        for stage in STAGES:
            for n in range(1, self.cluster.replicas(stage) + 1):
                label = f"{stage}-{n}"
                self.cluster.held.add(label)
                await asyncio.to_thread(self.cluster.replace, label)
                self.cluster.held.discard(label)
                rolled.replaced.append(label)
        ended = time.monotonic()
        rolled.seconds = round(ended - started, 1)
        rolled.asked = searches.asked - asked
        await asyncio.sleep(SEARCH_WAIT_S)  # until the searches asked during it have ended
        rolled.failed = searches.failed_between(started, ended)
        rolled.under_publishing = not publishing.done()
