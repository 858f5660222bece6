"""Ports for the servers kbus_dev starts: processes picking at once never get the same one, and
a port handed out stays out of the others' picks while its claim is fresh, even while nothing
listens on it (a server between a stop and its restart)."""

from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from kbus_dev import servers


def _use(claims: Path) -> None:
    servers.CLAIMS = claims


def _pick(count: int) -> list[int]:
    return [servers.free_port() for _ in range(count)]


def test_processes_picking_at_once_never_get_the_same_port(tmp_path: Path) -> None:
    with ProcessPoolExecutor(4, initializer=_use, initargs=(tmp_path,)) as pool:
        picked = [port for ports in pool.map(_pick, [300] * 4) for port in ports]
    assert len(picked) == len(set(picked)) == 1_200
    assert all(port in servers.PORTS for port in picked)


def test_a_claimed_port_is_not_handed_out_until_its_claim_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(servers, "CLAIMS", tmp_path)
    monkeypatch.setattr(servers, "PORTS", range(20_000, 20_004))
    taken = {servers.free_port() for _ in range(4)}
    assert taken == set(range(20_000, 20_004))  # nothing listens on them: only claims hold them
    stale = time.time() - servers.CLAIM_KEPT_S - 1
    os.utime(tmp_path / "20002", (stale, stale))
    assert servers.free_port() == 20_002  # the stale claim is taken over, the others kept
