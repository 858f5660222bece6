"""``python -m bench.fsync``: what syncing every write to disk costs a three-server cluster.

Two three-server JetStream clusters on this machine, one with ``sync_interval: always`` and
one with the server's default (a sync every two minutes), take turns: each round publishes the
same messages (``document.added``-sized) to kbus's documents stream at three replicas, one at a
time awaiting each acknowledgement, then 64 at a time. Prints publishes per second per variant
(medians of the rounds) and their ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import nats
from kbus_contract.topology import Topology
from kbus_dev.cluster import start_nats_cluster, urls
from kbus_dev.servers import Server
from kbus_runtime.declaring import declare_streams

#: The mean size of a ``document.added`` message in the bench's SciFact run (docs/performance.md).
MESSAGE_BYTES = 1_700


async def _round(servers: list[Server], messages: int, parallel: int, prefix: str) -> float:
    nc = await nats.connect(urls(servers).split(","))
    try:
        topology = Topology(prefix, replicas=3)
        js = nc.jetstream(timeout=10.0)
        await declare_streams(js, topology)
        subject = topology.accepted(topology.added("bench", "fsync"))  # the stream itself
        body = b"x" * MESSAGE_BYTES
        gate = asyncio.Semaphore(parallel)

        async def one(n: int) -> None:
            async with gate:
                await js.publish(subject, body, headers={"Nats-Msg-Id": f"{prefix}-{n}"})

        started = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(messages)))
        return messages / (time.perf_counter() - started)
    finally:
        await nc.close()


async def _main(messages: int, rounds: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="kbus-fsync-") as root:
        clusters = {
            "sync_always": start_nats_cluster(Path(root) / "always", sync_always=True),
            "default": start_nats_cluster(Path(root) / "default", sync_always=False),
        }
        try:
            rates: dict[str, dict[str, list[float]]] = {
                name: {"one_at_a_time": [], "64_at_a_time": []} for name in clusters
            }
            for r in range(rounds):
                order = list(clusters) if r % 2 == 0 else list(reversed(clusters))
                for name in order:
                    for label, parallel in (("one_at_a_time", 1), ("64_at_a_time", 64)):
                        rate = await _round(clusters[name], messages, parallel, f"f{r}{parallel}")
                        rates[name][label].append(rate)
        finally:
            for servers in clusters.values():
                for server in servers:
                    server.stop()
    medians = {n: {k: statistics.median(v) for k, v in d.items()} for n, d in rates.items()}
    medians["ratio_always_to_default"] = {
        k: medians["sync_always"][k] / medians["default"][k] for k in medians["default"]
    }
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fsync")
    parser.add_argument("--messages", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(_main(args.messages, args.rounds)), indent=2))


if __name__ == "__main__":
    main()
