"""Clusters on one machine: three nats-server processes as one JetStream cluster (each with
its own store, routed to the others, syncing every write to disk), and three weaviate-server
processes as one Weaviate cluster (gossip and Raft on loopback), all on 127.0.0.1."""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
import time
from pathlib import Path
from typing import Any

import httpx
import nats
from nats.errors import Error as NatsError
from nats.js.api import StorageType, StreamConfig
from nats.js.errors import APIError

from kbus_dev.servers import Server, free_port, start_nats, start_weaviate, weaviate_ports


class NodeExitedError(RuntimeError):
    """A server exited while its cluster formed."""


def start_nats_cluster(
    data_dir: Path,
    size: int = 3,
    timeout_s: float = 60.0,
    *,
    sync_always: bool = True,
    attempts: int = 2,
) -> list[Server]:
    """``size`` nats-servers as one JetStream cluster (``n1``..``nN``), ready when every one
    of them sees a JetStream meta leader. ``sync_always=False`` leaves the server's own
    sync interval (every two minutes). A server that exits while the cluster forms (a port
    chosen free was taken before it bound it) ends the attempt: the next one starts on new
    ports."""
    for attempt in range(attempts):
        root = data_dir if attempt == 0 else data_dir / f"attempt{attempt + 1}"
        servers = _nats_servers(root, size, sync_always)
        wait_for_meta_leader(servers, timeout_s)
        wait_placeable(servers, timeout_s)
        exited = [s.name for s in servers if s.proc.poll() is not None]
        if not exited:
            return servers
        for server in servers:
            server.stop()
        if attempt + 1 == attempts:
            raise NodeExitedError(f"NATS server(s) {exited} exited while the cluster formed")
    raise AssertionError("unreachable")


def _nats_servers(data_dir: Path, size: int, sync_always: bool) -> list[Server]:
    routes = [free_port() for _ in range(size)]
    servers = []
    for n, route in enumerate(routes, start=1):
        others = ", ".join(f"nats-route://127.0.0.1:{p}" for p in routes if p != route)
        cluster = (
            f"server_name: n{n}\n"
            f"cluster {{\n  name: kbus\n  listen: 127.0.0.1:{route}\n  routes: [{others}]\n}}\n"
        )
        servers.append(
            start_nats(
                data_dir / f"n{n}",
                extra_config=cluster,
                # Every write reaches the disk before it is acknowledged: a power loss of the
                # whole cluster loses nothing acknowledged (docs/reliability.md, "A cluster").
                jetstream_config="  sync_interval: always\n" if sync_always else "",
                wait=False,
            )
        )
    return servers


def wait_for_meta_leader(servers: list[Server], timeout_s: float = 60.0) -> None:
    """Until the running servers agree on a JetStream meta leader and it sees every other
    running server as current (a stream of three replicas can only be placed then)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        running = [s for s in servers if s.proc.poll() is None]
        views = [_jsz(s) for s in running]
        leaders = {(v.get("meta_cluster") or {}).get("leader") for v in views}
        if len(leaders) == 1 and None not in leaders:
            replicas = [
                r for v in views for r in (v.get("meta_cluster") or {}).get("replicas") or []
            ]
            current = {r["name"] for r in replicas if r.get("current") and not r.get("offline")}
            if len(current) >= len(running) - 1:
                return
        time.sleep(0.3)
    raise TimeoutError(f"the NATS cluster elected no JetStream leader within {timeout_s:.0f}s")


def wait_placeable(servers: list[Server], timeout_s: float = 60.0) -> None:
    """Until a stream with a replica on every server can be placed: right after its election
    the meta leader may still count a peer offline (``no suitable peers for placement``) until
    that peer's first report reaches it. A probe stream in memory, made and removed."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # callable from a running loop
        pool.submit(asyncio.run, _place_probe(urls(servers), len(servers), timeout_s)).result()


async def _place_probe(url: str, replicas: int, timeout_s: float) -> None:
    nc = await nats.connect(url.split(","), max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    try:
        js = nc.jetstream(timeout=5.0)
        name = f"KBUS_PROBE_{secrets.token_hex(4).upper()}"
        config = StreamConfig(
            name=name,
            subjects=[f"kbus.probe.{name}"],
            num_replicas=replicas,
            storage=StorageType.MEMORY,
        )
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                await js.add_stream(config)
                await js.delete_stream(name)
                return
            except (APIError, NatsError) as exc:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no stream of {replicas} replicas placed: {exc}") from exc
                await asyncio.sleep(0.5)
    finally:
        await nc.close()


def _jsz(server: Server) -> dict[str, Any]:
    try:
        info: dict[str, Any] = httpx.get(
            f"http://127.0.0.1:{server.ports['monitor']}/jsz", timeout=1.0
        ).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return info


def urls(servers: list[Server]) -> str:
    """The cluster's client URLs, comma-separated (as ``KBUS_NATS_URL`` takes them)."""
    return ",".join(f"nats://127.0.0.1:{s.ports['client']}" for s in servers)


def start_weaviate_cluster(
    data_dir: Path,
    size: int = 3,
    timeout_s: float = 180.0,
    attempts: int = 2,
    api_key: str | None = None,
) -> list[Server]:
    """``size`` weaviate-servers (``node1``..) as one cluster, ready when every node reports
    all of them healthy. A node that exits while the cluster forms (a port chosen free was
    taken before it bound it) ends the attempt: the next one starts on new ports."""
    for attempt in range(attempts):
        root = data_dir if attempt == 0 else data_dir / f"attempt{attempt + 1}"
        cluster = {f"node{n}": weaviate_ports() for n in range(1, size + 1)}
        secret = secrets.token_urlsafe(24)  # the nodes' data API, one for the cluster
        servers = [
            start_weaviate(
                root / name,
                ports=ports,
                node=name,
                cluster=cluster,
                wait=False,
                api_key=api_key,
                cluster_secret=secret,
            )
            for name, ports in cluster.items()
        ]
        try:
            wait_for_weaviate_nodes(servers, size, timeout_s, exited_fails=True)
        except NodeExitedError:
            for server in servers:
                server.stop()
            if attempt + 1 == attempts:
                raise
            continue
        return servers
    raise AssertionError("unreachable")


def wait_for_weaviate_nodes(
    servers: list[Server], healthy: int, timeout_s: float = 180.0, *, exited_fails: bool = False
) -> None:
    """Until every running node reports ``healthy`` healthy nodes and one Raft leader (the
    election takes some seconds after the nodes see each other). ``exited_fails``: a node that
    exited raises :class:`NodeExitedError` at once (forming a cluster, none should)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        running = [s for s in servers if s.proc.poll() is None]
        if exited_fails and len(running) < len(servers):
            exited = [s.name for s in servers if s not in running]
            raise NodeExitedError(f"Weaviate node(s) {exited} exited while the cluster formed")
        if (
            running
            and all(_healthy_nodes(s) >= healthy for s in running)
            and raft_leader(running[0])
        ):
            return
        time.sleep(0.5)
    raise TimeoutError(f"the Weaviate cluster did not have {healthy} healthy nodes in time")


def weaviate_auth(server: Server) -> dict[str, str]:
    """The header a Weaviate node started with an API key wants (none for an open one)."""
    key = (server.env or {}).get("AUTHENTICATION_APIKEY_ALLOWED_KEYS")
    return {"Authorization": f"Bearer {key}"} if key else {}


def _healthy_nodes(server: Server) -> int:
    try:
        body = httpx.get(
            f"http://127.0.0.1:{server.ports['http']}/v1/nodes",
            headers=weaviate_auth(server),
            timeout=2.0,
        ).json()
    except (httpx.HTTPError, ValueError):
        return 0
    return sum(1 for node in body.get("nodes") or [] if node.get("status") == "HEALTHY")


def raft_leader(server: Server) -> str | None:
    """The schema's Raft leader, if every node that answers agrees on one."""
    url = f"http://127.0.0.1:{server.ports['http']}/v1/cluster/statistics"
    try:
        reply = httpx.get(url, headers=weaviate_auth(server), timeout=2.0)
        stats = reply.json().get("statistics") or []
    except (httpx.HTTPError, ValueError):
        return None
    leaders = {str(s.get("leaderId") or "") for s in stats}
    return leaders.pop() if len(leaders) == 1 and "" not in leaders else None


def weaviate_hosts(servers: list[Server]) -> str:
    """``KBUS_WEAVIATE_HOSTS`` for a cluster on this machine."""
    return ",".join(f"127.0.0.1:{s.ports['http']}:{s.ports['grpc']}" for s in servers)
