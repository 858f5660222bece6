"""``python -m bench.startup`` runs against a stack and reports both waits (their figures are
the bench's to claim, in docs/performance.md, not this test's)."""

from __future__ import annotations

import subprocess
import sys

from tests.e2e.conftest import Stack


def test_the_startup_bench_times_a_cli_search_and_an_mcp_initialize(stack: Stack) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.startup",
            "--runs",
            "1",
            "--nats-url",
            stack.nats_url,
            "--prefix",
            stack.topology.prefix,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: a goal missed on a busy machine
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["cli search", "mcp initialize"], lines
