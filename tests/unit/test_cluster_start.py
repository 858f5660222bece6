"""Forming a Weaviate cluster: a node that exits ends the wait at once (then the cluster is
started again on new ports), instead of the rest waiting out the timeout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kbus_dev.cluster import NodeExitedError, wait_for_weaviate_nodes
from kbus_dev.servers import Server


def _process(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


def test_a_node_that_exits_while_the_cluster_forms_ends_the_wait(tmp_path: Path) -> None:
    exited = _process("pass")
    exited.wait()
    running = _process("import time; time.sleep(30)")
    servers = [
        Server("node1", running, tmp_path / "1.log", {"http": 9}),
        Server("node3", exited, tmp_path / "3.log", {"http": 9}),
    ]
    try:
        with pytest.raises(NodeExitedError, match="node3"):
            wait_for_weaviate_nodes(servers, 2, timeout_s=20, exited_fails=True)
        # Without: a node that died does not count, and the others are waited for.
        with pytest.raises(TimeoutError):
            wait_for_weaviate_nodes(servers, 2, timeout_s=1)
    finally:
        running.kill()
