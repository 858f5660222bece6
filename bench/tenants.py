"""Many tenants on one NATS node and one Weaviate node, provisioned as a deployment is, side by
side at each size in one run.

    python -m bench.tenants [--sizes 100,1000,10000] [--publishers 500] [--connecting 2000]
                            [--out FILE]

One locked installation (:mod:`kbus_dev.locked`: nats-server in operator mode, each tenant an
account pushed to it). The tenants grow to each size in turn; at each: the time nats-auth takes
to add one tenant (``nats-auth --add``, its account pushed) and to remove one (``--drop``), run
as an operator runs it, in a process of its own, while two other tenants search and publish
without pause (the longest gap between their answers, and their failures); nats-server's and
Weaviate's memory and open files; the storage JetStream reserves; nats-server's restart to
healthy; and a cold tenant's first search (its account loaded again after that restart, its
Weaviate tenant inactive) against its next; then what nats-server's memory grows by for each
account it loads (``--connecting`` tenants each connect, search once and leave: it releases
none until it restarts). Then ``--publishers`` tenants each publish one
document at once, against one tenant publishing as many: time to searchable, p50 and p99.
Goals (docs/scaling.md, "Tenants"): no gap over 1 s and nothing failed, adding or removing one
tenant within 1 s, reserved storage the same at every size, the many tenants' p99 at most
twice the one's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from kbus_client import CredentialFile, KbClient
from kbus_dev.locked import WEAVIATE_KEY, Locked, start_locked
from kbus_dev.natsauth import Credential, inbox
from kbus_dev.servers import Server, start_nats
from nats.aio.client import RawCredentials

LIBRARY = "notes"
#: The tenants that keep searching and publishing while others are added and removed.
SEARCHER, PUBLISHER, COLD = "watch-search", "watch-publish", "cold"
GAP_GOAL_S = 1.0
#: Adding or removing one tenant with nats-auth, as an operator runs it, at any number of them.
ADD_GOAL_S = 1.0


def tenant(number: int) -> Credential:
    return Credential(f"b{number:05d}-all", f"b{number:05d}")


WATCHERS = [Credential(f"{name}-all", name) for name in (SEARCHER, PUBLISHER, COLD)]


@dataclass
class Watch:
    """Answers and failures of a loop of requests."""

    answered: int = 0
    failures: list[str] = field(default_factory=list)
    longest_gap_s: float = 0.0


async def _loop(ask: Callable[[], Awaitable[Any]], stop: asyncio.Event) -> Watch:
    watch, last = Watch(), time.monotonic()
    while not stop.is_set():
        try:
            await ask()
            watch.answered += 1
        except Exception as exc:
            watch.failures.append(f"{type(exc).__name__}: {exc}"[:200])
        now = time.monotonic()
        watch.longest_gap_s = max(watch.longest_gap_s, now - last)
        last = now
        await asyncio.sleep(0.05)
    return watch


async def client(locked: Locked, held: Credential) -> KbClient:
    return await KbClient.connect(
        locked.nats_url,
        tenant=held.tenant,
        user_credentials=RawCredentials(locked.creds[held.name]),
        inbox_prefix=inbox(held.name),
    )


@dataclass
class Row:
    tenants: int
    grow_s: float
    add_s: float
    remove_s: float
    longest_gap_s: float
    failed: int
    answered: int
    nats_rss_mb: float
    nats_open_files: int
    weaviate_rss_mb: float
    weaviate_open_files: int
    reserved_storage_bytes: int
    restart_s: float
    first_search_s: float
    next_search_s: float
    #: After the restart, tenants that each connected, searched once and left, and what nats-server
    #: holds for each account it loaded (it releases none until it restarts).
    connected: int = 0
    mb_per_account_loaded: float = 0.0


def _process(server: Server) -> tuple[float, int]:
    pid = server.proc.pid
    status = Path(f"/proc/{pid}/status").read_text()
    rss_kb = next(int(line.split()[1]) for line in status.splitlines() if line[:6] == "VmRSS:")
    return rss_kb / 1024, len(os.listdir(f"/proc/{pid}/fd"))


def _cpu_s(locked: Locked) -> dict[str, float]:
    """CPU seconds each server and service has used so far."""
    used = {}
    for server in [locked.nats, locked.weaviate, *locked.services]:
        fields = Path(f"/proc/{server.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        used[server.name] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return used


async def _timed(locked: Locked, kbs: list[KbClient], documents: int) -> dict[str, Any]:
    """``_searchable``'s p50 and p99, and the CPU seconds each process used meanwhile."""
    before = _cpu_s(locked)
    took = await _searchable(kbs, documents)
    after = _cpu_s(locked)
    cpu = {name: round(after[name] - before[name], 1) for name in after}
    return {**_quantiles(took), "cpu_s": {n: s for n, s in cpu.items() if s >= 0.1}}


def _reserved(locked: Locked) -> int:
    jsz = httpx.get(f"http://127.0.0.1:{locked.nats.ports['monitor']}/jsz", timeout=10).json()
    return int(jsz.get("reserved_storage", 0))


async def add_and_remove(locked: Locked, listed: list[Credential], n: int) -> dict[str, Any]:
    """Add one tenant and remove it, the watchers asking all the while."""
    searcher = await client(locked, WATCHERS[0])
    publisher = await client(locked, WATCHERS[1])
    stop = asyncio.Event()
    count = iter(range(1_000_000))

    async def publish() -> None:
        number = next(count)
        await publisher.publish_document(
            library=LIBRARY, document_id=f"p{n}-{number}", text=f"Watch note {number}."
        )

    loops = [
        asyncio.create_task(_loop(lambda: searcher.search("note", libraries=[LIBRARY]), stop)),
        asyncio.create_task(_loop(publish, stop)),
    ]
    await asyncio.sleep(1.0)
    newcomer = Credential("newcomer-all", "newcomer")
    added = await nats_auth(locked, "--add", newcomer.spec)
    record = CredentialFile.read(locked.auth / f"credential-{newcomer.name}.json")
    locked.creds[newcomer.name] = record.creds.get_secret_value()
    held = await client(locked, newcomer)
    await held.search("nothing", libraries=[LIBRARY])
    await held.close()
    removed = await nats_auth(locked, "--drop", newcomer.name)
    await asyncio.sleep(1.0)
    stop.set()
    watches = await asyncio.gather(*loops)
    await searcher.close()
    await publisher.close()
    return {
        "add_s": added,
        "remove_s": removed,
        "longest_gap_s": max(w.longest_gap_s for w in watches),
        "failed": sum(len(w.failures) for w in watches),
        "answered": sum(w.answered for w in watches),
        "failures": [f for w in watches for f in w.failures][:5],
    }


async def nats_auth(locked: Locked, *change: str) -> float:
    """Seconds ``python -m kbus_dev nats-auth`` takes to make a change and push it, run in a
    process of its own as an operator runs it (its imports included)."""
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kbus_dev",
        "nats-auth",
        "--out",
        str(locked.auth),
        "--prefix",
        locked.prefix,
        "--resolver-dir",
        locked.resolver_dir,
        "--push",
        locked.nats_url,
        *change,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await process.communicate()
    if process.returncode:
        raise RuntimeError(f"nats-auth {' '.join(change)} failed: {err.decode()[-500:]}")
    return time.monotonic() - started


def _restart(locked: Locked) -> float:
    """nats-server stopped and started again on its port and data: seconds to healthy."""
    port, data = locked.nats.ports["client"], locked.nats.log.parent
    locked.nats.stop()
    started = time.monotonic()
    locked.nats = start_nats(data, port, extra_config='include "auth.conf"\n')
    return time.monotonic() - started


def _make_inactive(locked: Locked, tenant: str) -> int:
    """Make a tenant inactive in every collection holding it (as a searcher does once it is
    idle, KBUS_WEAVIATE_IDLE_TENANT_S); how many."""
    base = f"http://127.0.0.1:{locked.weaviate_http}/v1/schema"
    headers = {"Authorization": f"Bearer {WEAVIATE_KEY}"}
    made = 0
    for collection in httpx.get(base, headers=headers, timeout=30).json().get("classes", []):
        name = collection["class"]
        held = httpx.get(f"{base}/{name}/tenants", headers=headers, timeout=30).json()
        if any(t["name"] == tenant for t in held):
            body = [{"name": tenant, "activityStatus": "INACTIVE"}]
            httpx.put(f"{base}/{name}/tenants", json=body, headers=headers, timeout=30)
            made += 1
    return made


async def _first_and_next_search(locked: Locked) -> tuple[float, float]:
    """A cold tenant's first search (its account loaded again after the server's restart, its
    Weaviate tenant inactive) and its next."""
    assert _make_inactive(locked, COLD) > 0, "the cold tenant holds nothing"
    kb = await client(locked, WATCHERS[2])
    try:
        times = []
        for _ in range(2):
            started = time.monotonic()
            await kb.search("cold", libraries=[LIBRARY])
            times.append(time.monotonic() - started)
        return times[0], times[1]
    finally:
        await kb.close()


async def _connected_once(locked: Locked, listed: list[Credential]) -> float:
    """Each of these tenants connects, searches once and leaves, 20 at a time: what
    nats-server's memory grew by, MB per tenant."""
    before, _ = _process(locked.nats)
    gate = asyncio.Semaphore(20)

    async def once(held: Credential) -> None:
        async with gate:
            kb = await client(locked, held)
            try:
                await kb.search("visit", libraries=[LIBRARY])
            finally:
                await kb.close()

    await asyncio.gather(*(once(held) for held in listed))
    await asyncio.sleep(1.0)
    after, _ = _process(locked.nats)
    return (after - before) / max(1, len(listed))


async def measure(locked: Locked, listed: list[Credential], grow_s: float, connecting: int) -> Row:
    n = len(listed) - len(WATCHERS)
    changes = await add_and_remove(locked, listed, n)
    nats_rss, nats_files = _process(locked.nats)
    weaviate_rss, weaviate_files = _process(locked.weaviate)
    reserved = _reserved(locked)
    restart = _restart(locked)
    await asyncio.sleep(2.0)  # the services reconnect
    first, following = await _first_and_next_search(locked)
    visitors = [c for c in listed if c not in WATCHERS][:connecting]
    per_account = await _connected_once(locked, visitors)
    print(f"{n} tenants: {json.dumps(changes)}", flush=True)
    return Row(
        n,
        grow_s,
        changes["add_s"],
        changes["remove_s"],
        changes["longest_gap_s"],
        changes["failed"],
        changes["answered"],
        nats_rss,
        nats_files,
        weaviate_rss,
        weaviate_files,
        reserved,
        restart,
        first,
        following,
        len(visitors),
        per_account,
    )


async def _searchable(kbs: list[KbClient], documents: int) -> list[float]:
    """Each client publishes ``documents`` one-paragraph documents at once and waits for each
    to be searchable: seconds from the start, each."""
    started = time.monotonic()

    async def one(kb: KbClient, number: int) -> float:
        await kb.publish_document(
            library=LIBRARY,
            document_id=f"d{number}",
            text=f"Note {number} of tenant {kb.tenant}: the crowdword paragraph.",
            wait=True,
            timeout_s=600,
        )
        return time.monotonic() - started

    return list(await asyncio.gather(*(one(kb, n) for kb in kbs for n in range(documents))))


def _quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {"p50_s": pick(0.5), "p99_s": pick(0.99)}


async def crowd(locked: Locked, listed: list[Credential], publishers: int) -> dict[str, Any]:
    """``publishers`` tenants each publishing one document at once, against one publishing as
    many (after them, on the same stack); with the CPU seconds each process used for each."""
    many = [await client(locked, held) for held in listed[:publishers]]
    try:
        tenants = await _timed(locked, many, 1)
    finally:
        for kb in many:
            await kb.close()
    solo = await client(locked, listed[publishers])
    try:
        one = await _timed(locked, [solo], publishers)
    finally:
        await solo.close()
    ratio = round(tenants["p99_s"] / one["p99_s"], 2)
    rss, files = _process(locked.weaviate)  # with the crowd's tenants active
    weaviate = {"weaviate_rss_mb": round(rss), "weaviate_open_files": files}
    return {"tenants": tenants, "one_tenant": one, "p99_ratio": ratio, **weaviate}


async def run(locked: Locked, sizes: list[int], publishers: int, connecting: int) -> dict[str, Any]:
    listed = list(WATCHERS)
    cold = await client(locked, WATCHERS[2])
    await cold.publish_document(
        library=LIBRARY, document_id="c", text="A cold tenant's note.", wait=True
    )
    await cold.close()
    rows: list[Row] = []
    for size in sizes:
        started = time.monotonic()
        listed = [*WATCHERS, *(tenant(n) for n in range(size))]
        await locked.provision(listed)
        rows.append(await measure(locked, listed, time.monotonic() - started, connecting))
    tenants = [c for c in listed if c not in WATCHERS]
    crowded = await crowd(locked, tenants, publishers) if 0 < publishers < len(tenants) else {}
    return {"rows": [asdict(r) for r in rows], "crowd": crowded, "goals": goals(rows, crowded)}


def goals(rows: list[Row], crowded: dict[str, Any]) -> dict[str, bool]:
    met = {
        "no_gap_over_1_s": all(r.longest_gap_s <= GAP_GOAL_S for r in rows),
        "nothing_failed": all(r.failed == 0 for r in rows),
        "reserved_storage_the_same_at_every_size": len({r.reserved_storage_bytes for r in rows})
        == 1,
        "adding_or_removing_one_at_most_1_s": all(
            max(r.add_s, r.remove_s) <= ADD_GOAL_S for r in rows
        ),
    }
    if crowded:
        met["crowd_p99_at_most_twice_one_tenant"] = crowded["p99_ratio"] <= 2.0
    return met


def markdown(result: dict[str, Any]) -> str:
    rows = result["rows"]
    head = ["tenants", *(f"{r['tenants']:,}" for r in rows)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    fields = [
        ("making them (nats-auth, pushed)", "grow_s", "{:.1f} s"),
        ("adding one / removing one", None, ""),
        ("longest gap between a watcher's answers meanwhile", "longest_gap_s", "{:.2f} s"),
        ("failed requests meanwhile", "failed", "{}"),
        ("nats-server memory", "nats_rss_mb", "{:.0f} MB"),
        ("nats-server open files", "nats_open_files", "{}"),
        ("Weaviate memory", "weaviate_rss_mb", "{:.0f} MB"),
        ("Weaviate open files", "weaviate_open_files", "{}"),
        ("JetStream storage reserved", "reserved_storage_bytes", "{:,} B"),
        ("nats-server restart to healthy", "restart_s", "{:.2f} s"),
        ("a cold tenant's first search / the next", None, ""),
        ("tenants that then connected, searched once and left", "connected", "{:,}"),
        (
            "nats-server memory per account it loaded (kept until a restart)",
            "mb_per_account_loaded",
            "{:.2f} MB",
        ),
    ]
    for title, key, form in fields:
        if key is None and title.startswith("adding"):
            cells = [f"{r['add_s']:.2f} / {r['remove_s']:.2f} s" for r in rows]
        elif key is None:
            cells = [f"{r['first_search_s']:.2f} / {r['next_search_s']:.2f} s" for r in rows]
        else:
            cells = [form.format(r[key]) for r in rows]
        lines.append("| " + " | ".join([title, *cells]) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tenants", description=__doc__)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--publishers", type=int, default=500)
    parser.add_argument(
        "--connecting",
        type=int,
        default=2000,
        help="tenants that each connect once after the restart, for nats-server's cost of an "
        "account it loaded",
    )
    parser.add_argument("--out", type=Path, default=Path("tenants.json"))
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    root = Path(tempfile.mkdtemp(prefix="kbus-tenants-"))
    locked = start_locked(root, WATCHERS)
    try:
        result = asyncio.run(run(locked, sizes, args.publishers, args.connecting))
    finally:
        with contextlib.suppress(Exception):
            locked.stop()
        shutil.rmtree(root, ignore_errors=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))
    print(json.dumps({"crowd": result["crowd"], "goals": result["goals"]}, indent=2))
    return 0 if all(result["goals"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
