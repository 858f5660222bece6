"""NATS and Weaviate on loopback, installed with ``go install`` at pinned versions.

The binaries live in a cache directory outside the repository (``$KBUS_HOME/bin``, by default
``~/.cache/kbus/bin``); the servers' data lives wherever the caller says.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

NATS_MODULE = "github.com/nats-io/nats-server/v2"
NATS_VERSION = "v2.12.15"
WEAVIATE_MODULE = "github.com/weaviate/weaviate/cmd/weaviate-server"
WEAVIATE_VERSION = "v1.38.11"
#: The official NATS command line, which the security tests attack with.
NATSCLI = ("nats", "github.com/nats-io/natscli/nats", "v0.5.0")


def kbus_home() -> Path:
    """Where kbus keeps its cache outside the repository."""
    return Path(os.environ.get("KBUS_HOME", Path.home() / ".cache" / "kbus")).expanduser()


def bin_dir() -> Path:
    return kbus_home() / "bin"


def _version_file(name: str) -> Path:
    return bin_dir() / f"{name}.version"


def ensure_binary(name: str, module: str, version: str, *, tool_module: bool = False) -> Path:
    """The path of a Go program, installing it if missing or stale.

    ``go install module@version`` by default. With ``tool_module`` the program is added as a
    tool of a scratch module (``go get -tool``) and built from there: for programs whose own
    go.mod has ``replace`` directives, which ``go install`` refuses.
    """
    target = bin_dir() / name
    stamp = _version_file(name)
    if target.is_file() and stamp.is_file() and stamp.read_text().strip() == version:
        return target
    go = shutil.which("go")
    if go is None:
        raise RuntimeError(f"{name} is not installed and there is no Go toolchain to install it")
    bin_dir().mkdir(parents=True, exist_ok=True)
    print(f"installing {name} {version} with Go (first time only; takes minutes)", flush=True)
    env = {**os.environ, "GOBIN": str(bin_dir()), "CGO_ENABLED": os.environ.get("CGO_ENABLED", "0")}
    for command, cwd in _go_commands(go, name, module, version, tool_module):
        subprocess.run(command, check=True, env=env, cwd=str(cwd))
    stamp.write_text(version + "\n")
    return target


def _go_commands(
    go: str, name: str, module: str, version: str, tool_module: bool
) -> list[tuple[list[str], Path]]:
    if not tool_module:
        return [([go, "install", f"{module}@{version}"], kbus_home())]
    scratch = kbus_home() / "tools" / name
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    return [
        ([go, "mod", "init", f"kbus-tools-{name}"], scratch),
        ([go, "get", "-tool", f"{module}@{version}"], scratch),
        ([go, "build", "-o", str(bin_dir() / name), module], scratch),
    ]


def ensure_installed() -> tuple[Path, Path]:
    """Both server binaries."""
    return (
        ensure_binary("nats-server", NATS_MODULE, NATS_VERSION),
        ensure_binary("weaviate-server", WEAVIATE_MODULE, WEAVIATE_VERSION),
    )


#: Where the ports of servers kbus_dev starts are chosen: below Linux's ephemeral range
#: (32768-60999), which outgoing connections take their local ports from. A port from that
#: range, free when chosen, can be held by a client's connection when a server restarts on it
#: (a Weaviate node once failed to rejoin, "bind: address already in use").
PORTS = range(20_000, 32_000)
_ports = random.Random()
#: Ports handed out on this machine, a file each, so that two processes (pytest's workers)
#: never pick the same one: a server stopped and started again on its ports (a Weaviate outage
#: in the chaos runs) finds them still free ("bind: address already in use" once, when another
#: worker had picked one meanwhile).
CLAIMS = Path(tempfile.gettempdir()) / "kbus-ports"
#: A claim older than this is from a run that ended; its port may be handed out again.
CLAIM_KEPT_S = 1_800.0
#: Picks that may find a claimed port before claims are ignored (a pool used up).
_CLAIMED_PICKS = 2_000


def free_port() -> int:
    """A loopback port nothing listens on, outside the ephemeral range, that no other process
    of kbus_dev's has been given in the last half hour."""
    CLAIMS.mkdir(exist_ok=True)
    picks = 0
    while True:
        port = _ports.choice(PORTS)
        picks += 1
        if picks <= _CLAIMED_PICKS and not _claim(port):
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def _claim(port: int) -> bool:
    """Whether this process now holds ``port``'s claim (made now, or taken over as stale)."""
    path = CLAIMS / str(port)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return True
    except FileExistsError:
        with contextlib.suppress(FileNotFoundError):
            if time.time() - path.stat().st_mtime > CLAIM_KEPT_S:
                path.unlink()  # the next pick of it may claim it
        return False


def _wait(
    check: Callable[[], bool], what: str, timeout_s: float, proc: subprocess.Popen[bytes], log: Path
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"{what} exited with {proc.returncode}; see {log}:\n"
                + log.read_text(errors="replace")[-3000:]
            )
        if check():
            return
        time.sleep(0.2)
    raise TimeoutError(f"{what} was not ready within {timeout_s:.0f}s; see {log}")


@dataclass
class Server:
    """A server process we started."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    ports: dict[str, int] = field(default_factory=dict)
    #: How it was started, so that it can be started again after a kill.
    cmd: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None

    def kill(self) -> None:
        """SIGKILL: a crash, with no chance to flush or say goodbye."""
        self.proc.kill()
        self.proc.wait()

    def restart(self) -> None:
        """Start the process again, as it was started (same configuration, ports, data)."""
        self.proc = _spawn(self.cmd, self.log, self.env)

    def stop(self, timeout_s: float = 20.0) -> None:
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _spawn(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def _tcp_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_nats(
    data_dir: Path,
    port: int | None = None,
    *,
    max_payload: int = 1024 * 1024,
    timeout_s: float = 30.0,
    extra_config: str = "",
    jetstream_config: str = "",
    wait: bool = True,
) -> Server:
    """nats-server with JetStream (file storage under ``data_dir``) on 127.0.0.1.

    ``extra_config`` is appended to the configuration (an ``authorization`` or ``cluster``
    block, say), ``jetstream_config`` to its ``jetstream`` block.
    """
    binary = ensure_binary("nats-server", NATS_MODULE, NATS_VERSION)
    port = port or free_port()
    monitor = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "nats.conf"
    config.write_text(
        f"listen: 127.0.0.1:{port}\n"
        f"http: 127.0.0.1:{monitor}\n"
        f"max_payload: {max_payload}\n"
        f'jetstream {{\n  store_dir: "{data_dir / "jetstream"}"\n{jetstream_config}}}\n'
        + extra_config
    )
    log = data_dir / "nats.log"
    cmd = [str(binary), "-c", str(config)]
    server = Server("nats", _spawn(cmd, log), log, {"client": port, "monitor": monitor}, cmd)
    if wait:
        _wait(lambda: _healthz(monitor), "nats-server", timeout_s, server.proc, log)
    return server


def _healthz(monitor: int) -> bool:
    try:
        return (
            httpx.get(
                f"http://127.0.0.1:{monitor}/healthz?js-enabled-only=true", timeout=1.0
            ).status_code
            == 200
        )
    except httpx.HTTPError:
        return False


def start_weaviate(
    data_dir: Path,
    http_port: int | None = None,
    grpc_port: int | None = None,
    *,
    timeout_s: float = 120.0,
    api_key: str | None = None,
    auto_schema: bool = False,
    ports: dict[str, int] | None = None,
    node: str = "node1",
    cluster: dict[str, dict[str, int]] | None = None,
    wait: bool = True,
    cluster_secret: str | None = None,
) -> Server:
    """weaviate-server on 127.0.0.1 with no modules and no telemetry.

    Anonymous access is on unless ``api_key`` is given: then only that key (user ``kbus``,
    an admin) gets in. ``ports`` (a stopped server's ``Server.ports``) restarts a server on its
    own data with the addresses its Raft log remembers. ``cluster`` (each node's ports, by
    name) makes it the node ``node`` of a cluster of those nodes; ``wait=False`` returns at
    once (a cluster's nodes answer only once enough of them are up). Weaviate listens for gRPC
    and for its nodes' data API on every interface (it has no setting to bind them): the data
    API takes only ``cluster_secret`` (one for all of a cluster's nodes; by default a new one),
    and an ``api_key`` closes gRPC and REST to anyone without it.
    """
    binary = ensure_binary("weaviate-server", WEAVIATE_MODULE, WEAVIATE_VERSION)
    ports = ports or {
        **weaviate_ports(),
        **({"http": http_port} if http_port else {}),
        **({"grpc": grpc_port} if grpc_port else {}),
    }
    data_dir.mkdir(parents=True, exist_ok=True)
    env = _weaviate_env(data_dir, ports, api_key, auto_schema, node, cluster)
    env["CLUSTER_BASIC_AUTH_USERNAME"] = "kbus-node"
    env["CLUSTER_BASIC_AUTH_PASSWORD"] = cluster_secret or secrets.token_urlsafe(24)
    log = data_dir / "weaviate.log"
    cmd = [str(binary), "--host", "127.0.0.1", "--port", str(ports["http"]), "--scheme", "http"]
    server = Server("weaviate", _spawn(cmd, log, env), log, ports, cmd, env)
    if not wait:
        return server
    proc = server.proc
    _wait(
        lambda: _weaviate_ready(ports["http"]) and _tcp_open(ports["grpc"]),
        "weaviate-server",
        timeout_s,
        proc,
        log,
    )
    return server


def _weaviate_env(
    data_dir: Path,
    ports: dict[str, int],
    api_key: str | None,
    auto_schema: bool,
    node: str,
    cluster: dict[str, dict[str, int]] | None,
) -> dict[str, str]:
    """weaviate-server's environment: no modules, no telemetry, loopback, and its ports."""
    env = {
        **os.environ,
        "PERSISTENCE_DATA_PATH": str(data_dir),
        "AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED": "false" if api_key else "true",
        "DEFAULT_VECTORIZER_MODULE": "none",
        "ENABLE_MODULES": "",
        "DISABLE_TELEMETRY": "true",
        # kbus declares its schema; auto-schema is only for others (the benchmark's peer).
        "AUTOSCHEMA_ENABLED": "true" if auto_schema else "false",
        "GO_PROFILING_DISABLE": "true",
        "PROMETHEUS_MONITORING_ENABLED": "false",
        "LOG_LEVEL": "warning",
        "CLUSTER_HOSTNAME": node,
        "CLUSTER_ADVERTISE_ADDR": "127.0.0.1",
        "CLUSTER_BIND_ADDR": "127.0.0.1",
        "CLUSTER_GOSSIP_BIND_PORT": str(ports["gossip"]),
        "CLUSTER_DATA_BIND_PORT": str(ports["data"]),
        "RAFT_PORT": str(ports["raft"]),
        "RAFT_INTERNAL_RPC_PORT": str(ports["raft_rpc"]),
        **_raft(node, ports, cluster),
        # A SIGKILLed node keeps what its object store wrote but can lose the vector index's
        # last entries, and a retried write of the same object skips the vector index: with
        # the on-disk indexing queue, a restarted node indexes what it stored (reliability.md,
        # "A cluster").
        **({"ASYNC_INDEXING": "true"} if cluster else {}),
        # Every search and write otherwise asks the schema's Raft leader for the collection's
        # definition, and hangs while a dead leader is not yet replaced (reliability.md, "The
        # schema's Raft leader").
        **({"COLLECTION_RETRIEVAL_STRATEGY": "LocalOnly"} if cluster else {}),
        # Writes (and tenant checks) still ask the leader: a lost leader is noticed after one
        # heartbeat timeout (1 s times this; Weaviate's default is 5).
        **({"RAFT_TIMEOUTS_MULTIPLIER": "1"} if cluster else {}),
        # A node that missed writes (at QUORUM, while it was down) is repaired by Weaviate's
        # asynchronous replication: a hash-tree comparison every 30 s that leaves alone what
        # was written in the last 30 s (its defaults, which a deployment keeps: kbus writes at
        # ALL). The tests wait for that repair; here it runs every 5 s on what is 5 s old.
        **(
            {"ASYNC_REPLICATION_FREQUENCY": "5s", "ASYNC_REPLICATION_PROPAGATION_DELAY": "5s"}
            if cluster
            else {}
        ),
        "GRPC_PORT": str(ports["grpc"]),
        "GOMAXPROCS": os.environ.get("GOMAXPROCS", "2"),
    }
    if api_key:
        env.update(
            {
                "AUTHENTICATION_APIKEY_ENABLED": "true",
                "AUTHENTICATION_APIKEY_ALLOWED_KEYS": api_key,
                "AUTHENTICATION_APIKEY_USERS": "kbus",
                "AUTHORIZATION_ADMINLIST_ENABLED": "true",
                "AUTHORIZATION_ADMINLIST_USERS": "kbus",
            }
        )
    return env


def _raft(
    node: str, ports: dict[str, int], cluster: dict[str, dict[str, int]] | None
) -> dict[str, str]:
    """The Raft and gossip settings of a lone node, or of one node of a cluster."""
    if not cluster:
        return {"RAFT_JOIN": f"{node}:{ports['raft']}", "RAFT_BOOTSTRAP_EXPECT": "1"}
    # Each node joins the gossip through all the others: a node restarted alone finds the
    # cluster through whichever is up (joining through the first node only, a restarted first
    # node started a cluster of its own and the three never met again).
    others = [f"127.0.0.1:{p['gossip']}" for name, p in cluster.items() if name != node]
    return {
        "RAFT_JOIN": ",".join(f"{name}:{p['raft']}" for name, p in cluster.items()),
        "RAFT_BOOTSTRAP_EXPECT": str(len(cluster)),
        "CLUSTER_IN_LOCALHOST": "true",
        "CLUSTER_JOIN": ",".join(others),
    }


def weaviate_ports() -> dict[str, int]:
    """Free ports for one Weaviate node. Nodes of a cluster on one host dial each other's
    Raft RPC at the Raft port + 1 and data at the gossip port + 1 (``CLUSTER_IN_LOCALHOST``),
    so those come in pairs."""
    gossip, raft = free_run(2), free_run(2)
    return {
        "http": free_port(),
        "grpc": free_port(),
        "gossip": gossip,
        "data": gossip + 1,
        "raft": raft,
        "raft_rpc": raft + 1,
    }


def free_run(count: int) -> int:
    """A free port whose next ``count - 1`` ports are free too."""
    while True:
        port = free_port()
        if all(_bindable(port + n) for n in range(1, count)):
            return port


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _weaviate_ready(port: int) -> bool:
    try:
        return (
            httpx.get(f"http://127.0.0.1:{port}/v1/.well-known/ready", timeout=1.0).status_code
            == 200
        )
    except httpx.HTTPError:
        return False
