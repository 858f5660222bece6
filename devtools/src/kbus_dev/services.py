"""The kbus services as separate processes, as production runs them."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import httpx

from kbus_dev.servers import Server, _spawn, free_port

SERVICES = ("gateway", "ingestor", "generator", "embedder", "searcher", "reranker")

#: The stages production deploys on their own (deploy/k8s/base/deployments.yaml): the service
#: each runs and the settings that give it its role. The searcher runs as two: the indexer
#: (the embeddings consumer) and the query searcher (``kb.search`` and the other requests).
STAGES: dict[str, tuple[str, dict[str, str]]] = {
    "gateway": ("gateway", {}),
    "ingestor": ("ingestor", {}),
    "generator": ("generator", {}),
    "embedder": ("embedder", {}),
    "indexer": ("searcher", {"KBUS_SEARCHER_SERVE": "false"}),
    "query": ("searcher", {"KBUS_SEARCHER_INDEX": "false"}),
    "reranker": ("reranker", {}),
}


def service_env(
    nats_url: str,
    weaviate_http: int,
    weaviate_grpc: int,
    *,
    prefix: str = "",
    collection: str = "KbusChunks",
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """The environment that points every service at one NATS and one Weaviate."""
    return {
        **os.environ,
        "KBUS_NATS_URL": nats_url,
        "KBUS_BUS_PREFIX": prefix,
        "KBUS_WEAVIATE_HOSTS": f"127.0.0.1:{weaviate_http}:{weaviate_grpc}",
        "KBUS_WEAVIATE_COLLECTION": collection,
        **(extra or {}),
    }


def start_service(
    name: str,
    env: dict[str, str],
    log_dir: Path,
    port: int | None = None,
    label: str = "",
    wrapper: str | None = None,
) -> Server:
    """Start ``python -m kbus_<name>`` with its HTTP port set; returns at once. ``label``
    names the process and its log (by default the service's name); ``wrapper``, a module
    run instead that is given the service's module name (a test's fault injection)."""
    port = port or free_port()
    label = label or name
    proc_env = {**env, f"KBUS_{name.upper()}_HTTP_PORT": str(port)}
    cmd = [sys.executable, "-m", *([wrapper] if wrapper else []), f"kbus_{name}"]
    proc = _spawn(cmd, log_dir / f"{label}.log", proc_env)
    return Server(label, proc, log_dir / f"{label}.log", {"http": port}, cmd, proc_env)


def start_replica(
    stage: str,
    replica: int,
    env: dict[str, str],
    log_dir: Path,
    port: int | None = None,
    wrapper: str | None = None,
) -> Server:
    """Start replica ``replica`` (from 1) of a stage, named ``<stage>-<replica>``."""
    service, role = STAGES[stage]
    label = f"{stage}-{replica}"
    return start_service(service, {**env, **role}, log_dir, port, label, wrapper)


def replica_names(replicas: int) -> list[tuple[str, int]]:
    """Every stage's replicas, as (stage, replica) pairs, stage by stage."""
    return [(stage, n) for stage in STAGES for n in range(1, replicas + 1)]


def wait_healthy(servers: list[Server], timeout_s: float = 180.0) -> None:
    """Wait until every service answers ``/health`` (its model is loaded and NATS is up)."""
    deadline = time.monotonic() + timeout_s
    pending = list(servers)
    while pending and time.monotonic() < deadline:
        for server in list(pending):
            if server.proc.poll() is not None:
                raise RuntimeError(
                    f"{server.name} exited with {server.proc.returncode}:\n"
                    + server.log.read_text(errors="replace")[-3000:]
                )
            if _healthy(server.ports["http"]):
                pending.remove(server)
        time.sleep(0.3)
    if pending:
        raise TimeoutError("not healthy in time: " + ", ".join(s.name for s in pending))


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).status_code < 300
    except httpx.HTTPError:
        return False


def start_deployed(env: dict[str, str], log_dir: Path) -> list[Server]:
    """One replica of every stage as production deploys them (:data:`STAGES`), healthy."""
    return _all_healthy([start_replica(stage, 1, env, log_dir) for stage in STAGES])


def start_all(
    env: dict[str, str], log_dir: Path, ports: dict[str, int] | None = None
) -> list[Server]:
    """Every service (:data:`SERVICES`), healthy."""
    return _all_healthy(
        [start_service(name, env, log_dir, (ports or {}).get(name)) for name in SERVICES]
    )


def _all_healthy(servers: list[Server]) -> list[Server]:
    """``servers`` once each answers healthy; all stopped if one does not."""
    try:
        wait_healthy(servers)
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers
