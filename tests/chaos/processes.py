"""The chaos run's processes: NATS, Weaviate and every stage's replicas, each of which can be
killed, brought back, or replaced the way a rolling upgrade replaces it."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from kbus_dev.cluster import start_nats_cluster, start_weaviate_cluster, urls, weaviate_hosts
from kbus_dev.servers import Server, free_port, start_nats, start_weaviate
from kbus_dev.services import STAGES, service_env, start_replica, wait_healthy

from tests.helpers import TEST_STORAGE

if TYPE_CHECKING:
    from tests.chaos.harness import ChaosConfig

#: Seconds a replica told to stop (SIGTERM) may take: the services' own grace plus a margin
#: (kbus_runtime.runner.GRACE_S, deploy/k8s terminationGracePeriodSeconds).
STOP_WAIT_S = 50.0


class Cluster:
    """NATS, Weaviate and the stages' replicas (``embedder-1``, ``embedder-2``, ...)."""

    def __init__(self, root: Path, env_extra: dict[str, str], config: ChaosConfig) -> None:
        self.root = root
        self.config = config
        self.nats_port = free_port()
        self.nats: list[Server] = []
        self.weaviate: list[Server] = []
        self.services: dict[str, Server] = {}
        #: Replicas the monkey holds down or replaces on purpose; the supervisor leaves them.
        self.held: set[str] = set()
        self.env_extra = env_extra
        #: The negative control's services ack first (tests.chaos.ack_first).
        self.wrapper = "tests.chaos.ack_first" if config.ack_first else None
        self.prefix = f"chaos{uuid.uuid4().hex[:6]}"
        self.collection = "Chaos" + uuid.uuid4().hex[:6]
        self._kills: dict[str, int] = {}
        #: Revivals and replacements run on threads: two kills of one replica that overlap
        #: must not both start a process for it (the first would run on, untracked).
        self._starting = threading.Lock()

    @property
    def nats_url(self) -> str:
        return urls(self.nats) if self.config.cluster else f"nats://127.0.0.1:{self.nats_port}"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def start(self) -> None:
        if self.config.cluster:
            self.nats = start_nats_cluster(self.root / "nats")
            self.weaviate = start_weaviate_cluster(self.root / "weaviate")
        else:
            self.nats = [start_nats(self.root / "nats", self.nats_port)]
            self.weaviate = [start_weaviate(self.root / "weaviate")]
        env = self._env()
        for stage in STAGES:
            for n in range(1, self.replicas(stage) + 1):
                self.services[f"{stage}-{n}"] = self._start(stage, n, env)
        wait_healthy(list(self.services.values()), timeout_s=400)

    def _start(self, stage: str, n: int, env: dict[str, str], port: int | None = None) -> Server:
        return start_replica(stage, n, env, self.logs, port, self.wrapper)

    def replicas(self, stage: str) -> int:
        """How many replicas ``stage`` runs."""
        if stage == "query" and self.config.query_replicas:
            return self.config.query_replicas
        return self.config.replicas

    def _env(self) -> dict[str, str]:
        extra = {**TEST_STORAGE, "KBUS_STREAM_MAX_BYTES": str(256 * 1024**2), **self.env_extra}
        if self.wrapper:
            extra["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # tests.chaos
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

    def next_victim(self, stage: str) -> str:
        """The replica of ``stage`` whose turn it is to be killed (each in turn)."""
        turn = self._kills.get(stage, 0)
        self._kills[stage] = turn + 1
        return f"{stage}-{turn % self.replicas(stage) + 1}"

    def kill(self, label: str) -> None:
        if self.services[label].proc.poll() is not None:
            return
        self.services[label].kill()

    def revive(self, label: str) -> None:
        with self._starting:
            if self.services[label].proc.poll() is None:
                return
            stage, n = label.rsplit("-", 1)
            port = self.services[label].ports["http"]
            self.services[label] = self._start(stage, int(n), self._env(), port)

    def replace(self, label: str) -> None:
        """What a rolling upgrade does to one pod: a new replica up and healthy first, then
        SIGTERM to the old one, which finishes or hands back its work and exits."""
        stage, n = label.rsplit("-", 1)
        fresh = self._start(stage, int(n), self._env())
        wait_healthy([fresh], timeout_s=300)
        with self._starting:
            old, self.services[label] = self.services[label], fresh
        old.stop(STOP_WAIT_S)

    def restart_nats(self) -> None:
        self.nats[0].stop()
        self.nats = [start_nats(self.root / "nats", self.nats_port)]

    def stop_weaviate(self) -> None:
        self.weaviate[0].stop()

    def start_weaviate(self) -> None:
        ports = self.weaviate[0].ports
        self.weaviate = [start_weaviate(self.root / "weaviate", ports=ports)]

    def revive_dead(self) -> list[str]:
        """Restart any replica that died on its own (Kubernetes would); names them."""
        dead = [
            n for n, s in self.services.items() if n not in self.held and s.proc.poll() is not None
        ]
        for label in dead:
            self.revive(label)
        return dead

    def stop(self) -> None:
        for server in self.services.values():
            server.stop()
        for infra in (*self.weaviate, *self.nats):
            infra.stop()
