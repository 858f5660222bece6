"""What a person or an agent host waits for when a command starts: a CLI search and an MCP
server's ``initialize``, as wall time from the process's start, against a running stack.

    python -m bench.startup [--runs 5] [--nats-url nats://127.0.0.1:4222] [--prefix P]

Each run starts ``kbus search`` (to its exit, the answer printed) and ``kbus mcp`` (to its
answer to ``initialize`` over stdio), each a fresh process; the median and the slowest are
reported against the goals (1 s and 2 s). A library of one document is made first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LIBRARY = "startup"
GOALS = {"cli search": 1.0, "mcp initialize": 2.0}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench.startup", "version": "1"},
    },
}


def _kbus() -> str:
    return str(Path(sys.executable).with_name("kbus"))


def _search(env: dict[str, str]) -> float:
    began = time.monotonic()
    subprocess.run(
        [_kbus(), "search", "how long does priming take", "--library", LIBRARY],
        env=env,
        check=True,
        capture_output=True,
    )
    return time.monotonic() - began


def _initialize(env: dict[str, str]) -> float:
    began = time.monotonic()
    server = subprocess.Popen(
        [_kbus(), "mcp", "--library", LIBRARY],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert server.stdin is not None
        assert server.stdout is not None
        server.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        server.stdin.flush()
        answer = json.loads(server.stdout.readline())
        took = time.monotonic() - began
        assert "result" in answer, answer
        return took
    finally:
        server.kill()
        server.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--nats-url", default="nats://127.0.0.1:4222")
    parser.add_argument("--prefix", default="", help="the stack's bus prefix")
    args = parser.parse_args(argv)
    env = {"KBUS_NATS_URL": args.nats_url, "KBUS_BUS_PREFIX": args.prefix}
    with tempfile.TemporaryDirectory() as folder:
        text = Path(folder) / "pump.txt"
        text.write_text("The pump primes itself within ninety seconds of power-on.\n")
        subprocess.run(
            [_kbus(), "ingest", "--library", LIBRARY, str(text)],
            env=env,
            check=True,
            capture_output=True,
        )
    times: dict[str, list[float]] = {name: [] for name in GOALS}
    for _ in range(args.runs):
        times["cli search"].append(_search(env))
        times["mcp initialize"].append(_initialize(env))
    failed = False
    for name, took in times.items():
        median, worst = statistics.median(took), max(took)
        met = median <= GOALS[name]
        failed |= not met
        print(
            f"{name}: median {median:.2f} s, slowest {worst:.2f} s over {len(took)} runs "
            f"(goal {GOALS[name]:g} s: {'met' if met else 'missed'})"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
