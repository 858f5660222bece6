"""A whole local kbus: NATS, Weaviate and the five services, started detached and stopped again.

Its state (process ids, ports, logs, data) lives under ``.kbus/`` in the working directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kbus_dev.cluster import start_nats_cluster, start_weaviate_cluster, urls, weaviate_hosts
from kbus_dev.llm import llm_url, start_llm
from kbus_dev.locked import Ports, start_locked
from kbus_dev.natsauth import Credential
from kbus_dev.servers import Server, start_nats, start_weaviate
from kbus_dev.services import (
    SERVICES,
    STAGES,
    replica_names,
    service_env,
    start_replica,
    start_service,
    wait_healthy,
)

STATE_DIR = Path(os.environ.get("KBUS_STATE_DIR", ".kbus"))
NATS_PORT = int(os.environ.get("KBUS_DEMO_NATS_PORT", "4222"))
WEAVIATE_HTTP = int(os.environ.get("KBUS_DEMO_WEAVIATE_HTTP_PORT", "8080"))
WEAVIATE_GRPC = int(os.environ.get("KBUS_DEMO_WEAVIATE_GRPC_PORT", "50051"))
LLM_PORT = int(os.environ.get("KBUS_DEMO_LLM_PORT", "8180"))
#: ``up --locked``: where the console (kbus over HTTP) listens.
CONSOLE_PORT = int(os.environ.get("KBUS_DEMO_CONSOLE_PORT", "8110"))
#: The services' /health and /metrics ports: this one and the five after it.
HTTP_PORTS_FROM = int(os.environ.get("KBUS_DEMO_HTTP_PORT", "8101"))
SERVICE_PORTS = {
    name: HTTP_PORTS_FROM + n
    for n, name in enumerate(
        ("ingestor", "embedder", "searcher", "reranker", "generator", "gateway")
    )
}


#: The tenant ``up --locked`` (and so ``make demo``) makes, with one credential of the same
#: name: every library, read and write.
TENANT = "demo"


@dataclass
class Stack:
    """What ``up`` started."""

    nats_url: str
    pids: dict[str, int]
    #: ``up --locked``: the tenant's credential file (the CLI's ``--credential``).
    credential: str | None = None
    #: ``up --locked``: the console's address (kbus over HTTP).
    console_url: str | None = None

    def save(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        state = {
            "nats_url": self.nats_url,
            "pids": self.pids,
            "credential": self.credential,
            "console_url": self.console_url,
        }
        (STATE_DIR / "state.json").write_text(json.dumps(state, indent=2))

    @classmethod
    def load(cls) -> Stack | None:
        path = STATE_DIR / "state.json"
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        pids = {k: int(v) for k, v in data["pids"].items()}
        return cls(data["nats_url"], pids, data.get("credential"), data.get("console_url"))

    def alive(self) -> bool:
        return all(_alive(pid) for pid in self.pids.values())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: Replicas of every stage ``up --cluster`` runs, as the prod overlay runs at least.
CLUSTER_REPLICAS = 2


def up(cluster: bool = False, llm: bool = False, locked: bool = False) -> Stack:
    """Start everything (or reuse what is running) and wait until it is healthy; with
    ``cluster``, three NATS servers and three Weaviate nodes, streams and collections at three
    copies, and two replicas of every stage (the searcher as an indexer and a query searcher);
    with ``llm``, the local LLM server, which the services reach at ``KBUS_LLM_URL``; with
    ``locked``, provisioned as a deployment is (docs/security.md): NATS in operator mode, the
    tenant ``demo`` an account of its own, every service with its own credentials."""
    if locked and cluster:
        raise SystemExit("up: --locked runs one NATS server and one Weaviate node, not --cluster")
    existing = Stack.load()
    if existing and existing.alive():
        print("kbus is already running (make stop to stop it)")
        return existing
    if existing:
        down()
    data, logs = STATE_DIR / "data", STATE_DIR / "logs"
    started: list[Server] = []
    credential = None
    try:
        extra: dict[str, str] = {}
        if llm:
            print("starting the LLM server (SmolLM2-135M-Instruct) ...", flush=True)
            started.append(start_llm(data / "llm", LLM_PORT))
            # Libraries' profiles may then name a query transformer and a prompted reranker.
            extra["KBUS_LLM_URL"] = llm_url(started[-1])
            extra["KBUS_SEARCHER_REWRITER"] = "openai"
            extra["KBUS_RERANKER_PROMPTED"] = "openai"  # the generator's backend already is
        print("starting nats-server and weaviate-server on 127.0.0.1 ...", flush=True)
        if locked:
            nats_url, weaviate, credential = _locked(data, logs, started, extra)
        else:
            nats_url, weaviate, servers_extra = _servers(data, started, cluster)
            env = service_env(
                nats_url,
                weaviate.ports["http"],
                weaviate.ports["grpc"],
                extra={**servers_extra, **extra},
            )
            services = _start_services(env, logs, cluster)
            started.extend(services)
            wait_healthy(services)
    except BaseException:
        for server in reversed(started):
            server.stop()
        raise
    console_url = f"http://127.0.0.1:{CONSOLE_PORT}" if locked else None
    stack = Stack(
        nats_url, {_key(s, started): s.proc.pid for s in started}, credential, console_url
    )
    stack.save()
    print(
        f"kbus is up: NATS {nats_url}, Weaviate http://127.0.0.1:{weaviate.ports['http']}, "
        f"logs in {logs}",
        flush=True,
    )
    return stack


def _locked(
    data: Path, logs: Path, started: list[Server], settings: dict[str, str]
) -> tuple[str, Server, str]:
    """The locked installation on the stack's ports: its NATS URL, its Weaviate node and the
    tenant's credential file."""
    print(f"provisioning the tenant {TENANT!r} (operator mode) and starting kbus ...", flush=True)
    ports = Ports(NATS_PORT, WEAVIATE_HTTP, WEAVIATE_GRPC, SERVICE_PORTS)
    installation = start_locked(
        data,
        [Credential.parse(TENANT)],
        settings,
        ports=ports,
        weaviate_key=weaviate_key(data),
        logs=logs,
    )
    started.extend([installation.nats, installation.weaviate, *installation.services])
    # kbus over HTTP: it holds no NATS user; each request connects as its token's credential.
    env = {**os.environ, "KBUS_NATS_URL": installation.nats_url}
    console = start_service("console", env, logs, CONSOLE_PORT)
    started.append(console)
    wait_healthy([console])
    credential = installation.auth / f"credential-{TENANT}.json"
    return installation.nats_url, installation.weaviate, str(credential)


def _start_services(env: dict[str, str], logs: Path, cluster: bool) -> list[Server]:
    if not cluster:
        print("starting ingestor, generator, embedder, searcher and reranker ...", flush=True)
        return [start_service(n, env, logs, SERVICE_PORTS[n]) for n in SERVICES]
    print(f"starting {CLUSTER_REPLICAS} replicas of every stage ...", flush=True)
    return [start_replica(stage, n, env, logs) for stage, n in replica_names(CLUSTER_REPLICAS)]


def _servers(
    data: Path, started: list[Server], cluster: bool
) -> tuple[str, Server, dict[str, str]]:
    """NATS and Weaviate, one of each or three of each; the services' NATS URL, the Weaviate
    node they use, and the settings a cluster needs."""
    # Weaviate listens for gRPC on every interface: only the services, with the key, get in.
    key = weaviate_key(data)
    if not cluster:
        started.append(start_nats(data / "nats", NATS_PORT))
        started.append(start_weaviate(data / "weaviate", WEAVIATE_HTTP, WEAVIATE_GRPC, api_key=key))
        return f"nats://127.0.0.1:{NATS_PORT}", started[-1], {"KBUS_WEAVIATE_API_KEY": key}
    nats = start_nats_cluster(data / "nats-cluster")
    started.extend(nats)
    weaviate = start_weaviate_cluster(data / "weaviate-cluster", api_key=key)
    started.extend(weaviate)
    extra = {
        "KBUS_WEAVIATE_API_KEY": key,
        "KBUS_STREAM_REPLICAS": "3",
        "KBUS_WEAVIATE_REPLICATION_FACTOR": "3",
        "KBUS_WEAVIATE_HOSTS": weaviate_hosts(weaviate),
    }
    return urls(nats), weaviate[0], extra


def weaviate_key(data: Path) -> str:
    """The stack's Weaviate API key, made on its first start and kept with its data (only its
    owner reads it)."""
    path = data / "weaviate-api-key"
    if not path.is_file():
        data.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(24))
        path.chmod(0o600)
    return path.read_text().strip()


def _key(server: Server, started: list[Server]) -> str:
    """A name per process: ``nats``, or ``nats-2`` for the second of a cluster."""
    same = [s for s in started if s.name == server.name]
    return server.name if len(same) == 1 else f"{server.name}-{same.index(server) + 1}"


def stop_order(names: Iterable[str]) -> list[str]:
    """The processes ``up`` started, in the order to stop them: services and stage replicas
    (``embedder``, ``query-2``), then the LLM server, Weaviate and NATS."""
    kinds = ("console", *SERVICES, *STAGES, "llm", "weaviate", "nats")
    return sorted(names, key=lambda name: kinds.index(name.split("-")[0]))


def down(timeout_s: float = 30.0) -> None:
    """Stop the services first, all at once (each drains its own work), then the LLM server,
    Weaviate and NATS: each step waits for the one before (the services need the servers to
    drain)."""
    stack = Stack.load()
    if stack is None:
        print("kbus is not running")
        return
    servers = ("llm", "weaviate", "nats")
    order = stop_order(stack.pids)
    steps = [[n for n in order if n.split("-")[0] not in servers]]
    steps += [[n for n in order if n.split("-")[0] == kind] for kind in servers]
    for step in steps:
        _stop_together({name: stack.pids[name] for name in step}, timeout_s)
    (STATE_DIR / "state.json").unlink(missing_ok=True)


def _stop_together(pids: dict[str, int], timeout_s: float) -> None:
    """SIGTERM to every one, then wait for all (SIGKILL to those left after ``timeout_s``)."""
    alive = {name: pid for name, pid in pids.items() if _alive(pid)}
    for pid in alive.values():
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while any(_alive(pid) for pid in alive.values()) and time.monotonic() < deadline:
        for pid in alive.values():
            _reap(pid)
        time.sleep(0.1)
    for name, pid in alive.items():
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        print(f"stopped {name}")


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
