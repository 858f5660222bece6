"""Parsing in worker processes: results come back, and a parse past its time is ended."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from kbus_contract import ContentType
from kbus_contract.errors import PermanentError
from kbus_ingestor.parsing import Limits
from kbus_ingestor.sandbox import ParserPool

from tests import samples


async def test_a_parse_past_its_time_is_dead_lettered_and_the_next_one_parses() -> None:
    pool = ParserPool(1, timeout_s=120, memory_bytes=2 * 1024**3, limits=Limits(2**24, 10))
    try:
        await pool.warm()
        deck = samples.slides([("Roadmap", "Ship the parser")])
        parsed = await pool.parse(ContentType.PPTX, deck, None)
        assert parsed.pages == (0,)
        assert "Ship the parser" in parsed.text
        pool.timeout_s = 0.0001  # shorter than any parse's round trip
        with pytest.raises(PermanentError) as caught:
            await pool.parse(ContentType.PPTX, deck, None)
        assert caught.value.code == "parse_timeout"
        pool.timeout_s = 120  # the workers were killed; new ones parse the next document
        assert (await pool.parse(ContentType.PPTX, deck, None)).text == parsed.text
        with pytest.raises(PermanentError) as refused:  # a failure inside a worker comes back
            await pool.parse(ContentType.PDF, b"%PDF-1.4 broken", None)
        assert refused.value.code == "unreadable"
    finally:
        pool.close()


def test_the_workers_end_with_a_killed_service(tmp_path: Path) -> None:
    # A service that starts its workers, says their pids, and is then SIGKILLed.
    script = (
        "import asyncio, sys\n"
        "from kbus_ingestor.parsing import Limits\n"
        "from kbus_ingestor.sandbox import ParserPool\n"
        "async def main():\n"
        "    pool = ParserPool(2, 60, 2 * 1024**3, Limits(2**24, 10))\n"
        "    await pool.warm()\n"
        "    print(*[p.pid for p in pool._executor._processes.values()], flush=True)\n"
        "    await asyncio.sleep(600)\n"
        "asyncio.run(main())\n"
    )
    service = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert service.stdout is not None
    workers = [int(pid) for pid in service.stdout.readline().split()]
    assert len(workers) == 2
    assert all(_alive(pid) for pid in workers)
    service.kill()
    service.wait()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in workers)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False
