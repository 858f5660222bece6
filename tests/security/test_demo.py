"""``make demo`` runs kbus as a deployment does (issue 57): NATS in operator mode, the demo's
tenant an account of its own reached with its credential, every service with its own. The
command the demo prints answers; nothing gets in without a credential, and the tenant's
credential reaches no other tenant's subjects."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import nats
import pytest
from kbus_client import CredentialFile
from kbus_contract.topology import Topology
from kbus_dev.servers import free_port, free_run
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Demo:
    env: dict[str, str]
    stdout: str

    @property
    def nats_url(self) -> str:
        return f"nats://127.0.0.1:{self.env['KBUS_DEMO_NATS_PORT']}"

    def next_command(self) -> tuple[dict[str, str], list[str]]:
        """The command the demo's last line tells a newcomer to type: its variables, and what
        follows ``uv run kbus``."""
        words = shlex.split(self.stdout.strip().splitlines()[-1])
        at = words.index("uv")
        assert words[at : at + 3] == ["uv", "run", "kbus"], words
        setting = dict(w.split("=", 1) for w in words[:at])
        return setting, words[at + 3 :]

    def credential(self) -> CredentialFile:
        """The credential file that command names."""
        return CredentialFile.read(self.next_command()[0]["KBUS_CREDENTIAL"])


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """``python -m kbus_dev demo`` on free ports, its state in a folder of its own."""
    root = tmp_path_factory.mktemp("demo")
    env = {
        **os.environ,
        "KBUS_STATE_DIR": str(root / ".kbus"),
        "KBUS_DEMO_NATS_PORT": str(free_port()),
        "KBUS_DEMO_WEAVIATE_HTTP_PORT": str(free_port()),
        "KBUS_DEMO_WEAVIATE_GRPC_PORT": str(free_port()),
        "KBUS_DEMO_HTTP_PORT": str(free_run(6)),
        "KBUS_DEMO_CONSOLE_PORT": str(free_port()),
    }
    down = [sys.executable, "-m", "kbus_dev", "down"]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kbus_dev", "demo", "--examples", str(REPO / "examples")],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        yield Demo(env, done.stdout)
    finally:
        subprocess.run(down, env=env, capture_output=True, timeout=180, check=False)


def test_the_command_the_demo_prints_answers_with_the_tenant_s_credential(demo: Demo) -> None:
    assert "indexed 5 documents" in demo.stdout, demo.stdout
    setting, arguments = demo.next_command()
    assert "KBUS_CREDENTIAL" in setting, demo.stdout
    assert "--tenant" not in arguments  # the credential names its tenant
    # As printed, on the ports this demo ran on: what it sets, nothing the test adds.
    kept = {k: v for k, v in demo.env.items() if not k.startswith("KBUS_")}
    env = {**kept, **setting}
    done = subprocess.run(
        [sys.executable, "-m", "kbus_cli", *arguments, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert reply["results"][0]["source_uri"] == "examples/install-guide.md", reply


def test_the_http_search_the_demo_prints_answers_with_a_token_of_the_credential(
    demo: Demo,
) -> None:
    """The two lines the demo prints for HTTP, as printed: the token command, then the search
    (its address, header and body read from the curl line)."""
    lines = demo.stdout.splitlines()
    [making] = [line.strip() for line in lines if line.strip().startswith("TOKEN=$(")]
    [curl] = [line.strip() for line in lines if line.strip().startswith("curl ")]
    words = shlex.split(making.removeprefix("TOKEN=$(").removesuffix(")"))
    at = words.index("uv")
    assert words[at : at + 4] == ["uv", "run", "kbus", "token"], words
    setting = dict(w.split("=", 1) for w in words[:at])
    kept = {k: v for k, v in demo.env.items() if not k.startswith("KBUS_")}
    token = subprocess.run(
        [sys.executable, "-m", "kbus_cli", "token"],
        env={**kept, **setting},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    asked = shlex.split(curl)
    body, url = asked[asked.index("-d") + 1], asked[-1]
    assert url == f"http://127.0.0.1:{demo.env['KBUS_DEMO_CONSOLE_PORT']}/v1/search"
    answer = httpx.post(
        url,
        content=body,
        headers={"Authorization": f"Bearer {token}", "content-type": "application/json"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["results"][0]["source_uri"] == "examples/install-guide.md"


def test_the_cli_on_the_demo_s_bus_says_what_a_credential_shows(demo: Demo) -> None:
    """A tenant's status is its libraries (the pipeline is the operator's view), its listings
    are titled with its tenant, and without a credential the CLI says to give one."""
    held = {**demo.env, **demo.next_command()[0]}
    for command, shown in (("status", "tenant demo"), ("libraries", "tenant demo")):
        done = _kbus(held, command)
        assert done.returncode == 0, done.stderr
        assert shown in done.stdout, done.stdout
        assert "handbook" in done.stdout, done.stdout
    bare = {k: v for k, v in held.items() if k != "KBUS_CREDENTIAL"}
    refused = _kbus(bare, "libraries")
    assert refused.returncode == 2, refused
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "--credential (KBUS_CREDENTIAL)" in refused.stderr, refused.stderr


def _kbus(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbus_cli", *arguments],
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_the_demo_s_bus_takes_no_one_without_a_credential(demo: Demo) -> None:
    with pytest.raises(Exception, match=r"(?i)authorization"):
        await nats.connect(demo.nats_url, max_reconnect_attempts=0, allow_reconnect=False)


async def test_the_demo_tenant_s_credential_reaches_no_other_tenant(demo: Demo) -> None:
    credential = demo.credential()
    errors: list[str] = []

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    nc = await nats.connect(
        demo.nats_url,
        **credential.nats_options(),
        error_cb=on_error,
        max_reconnect_attempts=0,
    )
    try:
        topology = Topology()
        own = await nc.request(topology.asked("kb.search", "demo"), b"{}", timeout=30)
        assert own.data, "the tenant's own search subject answers"
        with pytest.raises((NoRespondersError, NatsTimeout)):
            await nc.request(topology.asked("kb.search", "acme"), b"{}", timeout=3)
        await nc.flush()
    finally:
        await nc.close()
    assert any("permissions violation" in e.lower() for e in errors), errors


def _descendants(roots: set[int]) -> set[int]:
    """The processes ``roots`` started, and theirs, with them."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found = set(roots)
    while grown := {pid for pid, parent in parents.items() if parent in found} - found:
        found |= grown
    return found


def _listening(pids: set[int]) -> list[tuple[str, int]]:
    """The TCP sockets ``pids`` listen on: (address in /proc/net's hex, port)."""
    inodes: set[str] = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                address, port = fields[1].split(":")
                out.append((address, int(port, 16)))
    return out


def test_every_server_the_demo_starts_listens_on_loopback_but_weaviate_s_two_ports(
    demo: Demo,
) -> None:
    """``ss -ltnp`` read from /proc: every listener of every process the demo started is on
    127.0.0.1, except the two ports weaviate-server binds on every interface with no setting
    to change it (docs/security.md: gRPC and the nodes' data API; test_exposure.py tries them
    without the key)."""
    state = json.loads((Path(demo.env["KBUS_STATE_DIR"]) / "state.json").read_text())
    pids: dict[str, int] = state["pids"]
    listening = _listening(_descendants(set(pids.values())))
    loopback = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1, ::1
    assert len(listening) >= len(pids), (pids, listening)
    exposed = {port for address, port in listening if address not in loopback}
    [weaviate] = [pid for name, pid in pids.items() if name.startswith("weaviate")]
    of_weaviate = {port for _, port in _listening(_descendants({weaviate}))}
    grpc = int(demo.env["KBUS_DEMO_WEAVIATE_GRPC_PORT"])
    assert grpc in exposed, listening
    assert len(exposed) == 2, listening
    assert exposed <= of_weaviate, listening
