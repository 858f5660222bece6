"""Fair share, side by side in one run: one tenant's bulk import against other tenants' documents.

    python -m bench.fairness [--documents 3000] [--every-s 10] [--edit-every-s 30]

Twice, with fair share off and then on (``KBUS_FAIR_SHARE``; then once more with it on for each
``--also KEY=VALUE`` setting of the services; ``--set KEY=VALUE`` for every run), each time on a
bus prefix and a collection of its own with the services started for it: tenant ``a``
publishes the first ``--documents`` SciFact documents as fast as it can; while they drain, tenants
``b`` and ``c`` each publish a one-paragraph document every ``--every-s`` seconds and ``a`` an
interactive edit every ``--edit-every-s`` seconds. Reported per mode: each group's time from
publish to receipt (``document.indexed``: searchable), p50 and max, and ``a``'s drain rate (its
documents over the time from its first publish to its last receipt). Counts and times only are
written: no text of the dataset.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from kbus_client.storing import until_stored
from kbus_contract import DocumentAdded, DocumentIndexed
from kbus_contract.lanes import Lane
from kbus_contract.topology import Topology
from kbus_dev.servers import ensure_installed, start_nats, start_weaviate
from kbus_dev.services import service_env, start_all
from nats.aio.client import Client
from nats.aio.msg import Msg

from bench.corpus import as_added, load
from bench.report import save

BULK, OTHERS, EDIT = "a", ("b", "c"), "a-edit"
#: What a probe says (every probe document has the same length; its id makes it unique).
PROBE_TEXT = (
    "A short note published while another tenant's import drains. It carries one paragraph of "
    "text, as an edit of a wiki page or a ticket would, and nothing else."
)


@dataclass
class Timings:
    """Publish and receipt times (monotonic seconds) of every document of one mode."""

    published: dict[tuple[str, str], float] = field(default_factory=dict)
    received: dict[tuple[str, str], float] = field(default_factory=dict)
    bulk_done: asyncio.Event = field(default_factory=asyncio.Event)
    bulk_count: int = 0

    def on_receipt(self, message: Msg) -> None:
        receipt = DocumentIndexed.model_validate_json(message.data)
        key = (receipt.tenant, receipt.document_id)
        self.received.setdefault(key, time.monotonic())
        bulk = sum(1 for tenant, _ in self.received if tenant == BULK)
        if bulk >= self.bulk_count:
            self.bulk_done.set()

    def waits(self, group: str) -> list[float]:
        """Publish-to-receipt seconds of a group's documents that got their receipt."""
        return [
            self.received[key] - at
            for key, at in self.published.items()
            if _group(key) == group and key in self.received
        ]


def _group(key: tuple[str, str]) -> str:
    tenant, document_id = key
    return EDIT if document_id.startswith("edit-") else tenant


async def _publish(
    nc: Client, topology: Topology, doc: DocumentAdded, timings: Timings, lane: Lane = Lane.BULK
) -> None:
    headers = {"Nats-Msg-Id": doc.message_id()}
    subject = topology.added(doc.tenant, doc.library, lane)
    timings.published[(doc.tenant, doc.document_id)] = time.monotonic()
    body = doc.model_dump_json().encode()
    # Sent again while the gate holds the tenant to its budget of documents waiting.
    await until_stored(lambda: nc.jetstream().publish(subject, body, headers=headers))


def _probe(tenant: str, n: int) -> DocumentAdded:
    document_id = f"edit-{n}" if tenant == BULK else f"probe-{n}"
    text = f"{PROBE_TEXT} Note {n} of {tenant}."
    return DocumentAdded(
        tenant=tenant, library="lib", document_id=document_id, title=document_id, text=text
    )


async def _probes(
    nc: Client, topology: Topology, timings: Timings, every_s: float, edit_every_s: float
) -> None:
    """B's and C's documents every ``every_s``, A's edits every ``edit_every_s``, until A's
    import is searchable."""
    started = time.monotonic()
    n = 0
    while not timings.bulk_done.is_set():
        n += 1
        for tenant in OTHERS:
            await _publish(nc, topology, _probe(tenant, n), timings)
        elapsed = time.monotonic() - started
        if elapsed // edit_every_s > (elapsed - every_s) // edit_every_s:
            await _publish(nc, topology, _probe(BULK, n), timings, Lane.INTERACTIVE)
        try:
            await asyncio.wait_for(timings.bulk_done.wait(), every_s)
        except TimeoutError:
            continue


@dataclass(frozen=True)
class Mode:
    """One configuration of the services: fair share on or off, and more settings."""

    fair: bool
    settings: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        extra = "".join(f", {k}={v}" for k, v in self.settings)
        return f"{'on' if self.fair else 'off'}{extra}"


async def run_mode(
    mode: Mode, docs: list[DocumentAdded], servers: tuple[str, int, int], args: Any, logs: Path
) -> dict[str, Any]:
    """One mode: the services started for it, the import and the probes, the timings."""
    nats_url, http, grpc = servers
    fair = mode.fair
    tag = f"{'fair' if fair else 'order'}{uuid.uuid4().hex[:6]}"
    env = service_env(
        nats_url,
        http,
        grpc,
        prefix=tag,
        collection=f"Bench{tag.capitalize()}",
        extra={"KBUS_FAIR_SHARE": str(fair).lower(), **dict(mode.settings)},
    )
    services = start_all(env, logs / tag)
    nc = await nats.connect(nats_url)
    topology = Topology(tag)
    timings = Timings(bulk_count=len(docs))
    try:
        await nc.subscribe(topology.document_indexed, cb=_async(timings.on_receipt))
        first = time.monotonic()
        for doc in docs:
            await _publish(nc, topology, doc, timings)
        # While the import drains.
        probing = asyncio.create_task(
            _probes(nc, topology, timings, args.every_s, args.edit_every_s)
        )
        await asyncio.wait_for(timings.bulk_done.wait(), args.timeout_s)
        await probing
        await _settle(timings, args.timeout_s)
        return _summary(mode, timings, first)
    finally:
        await nc.close()
        for service in services:
            service.stop()


def _async(call: Any) -> Any:
    async def cb(message: Msg) -> None:
        call(message)

    return cb


async def _settle(timings: Timings, timeout_s: float) -> None:
    """Wait for the probes' last receipts."""
    for _ in range(round(timeout_s / 0.2)):
        if not set(timings.published) - set(timings.received):
            return
        await asyncio.sleep(0.2)


def _summary(mode: Mode, timings: Timings, first: float) -> dict[str, Any]:
    bulk_last = max(t for (tenant, _), t in timings.received.items() if tenant == BULK)
    bulk = sum(1 for key in timings.published if _group(key) == BULK)
    out: dict[str, Any] = {
        "fair_share": mode.fair,
        "mode": mode.label,
        "bulk_documents": bulk,
        "bulk_drain_s": round(bulk_last - first, 1),
        "bulk_docs_per_s": round(bulk / (bulk_last - first), 2),
    }
    for group in (*OTHERS, EDIT):
        waits = timings.waits(group)
        sent = sum(1 for key in timings.published if _group(key) == group)
        out[group] = {
            "documents": sent,
            "received": len(waits),
            "p50_s": round(statistics.median(waits), 2) if waits else None,
            "max_s": round(max(waits), 2) if waits else None,
        }
    return out


def markdown(results: list[dict[str, Any]]) -> str:
    """The two modes side by side."""
    lines = [
        "| fair share | a's drain | a's docs/s | b p50 / max | c p50 / max | a's edit p50 / max |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        cells = [
            f"{r[g]['p50_s']} / {r[g]['max_s']} s ({r[g]['received']}/{r[g]['documents']})"
            for g in (*OTHERS, EDIT)
        ]
        lines.append(
            f"| {r['mode']} | {r['bulk_drain_s']} s "
            f"| {r['bulk_docs_per_s']} | " + " | ".join(cells) + " |"
        )
    off = results[0]
    lines.append("")
    for r in results[1:]:
        ratio = r["bulk_docs_per_s"] / off["bulk_docs_per_s"]
        lines.append(f"a's drain rate, {r['mode']} / off: {ratio:.3f}")
    return "\n".join(lines)


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.fairness", description=__doc__)
    p.add_argument("--dataset", type=Path, default=Path("../shared/datasets/scifact"))
    p.add_argument("--documents", type=int, default=3000)
    p.add_argument("--every-s", type=float, default=10.0)
    p.add_argument("--edit-every-s", type=float, default=30.0)
    p.add_argument("--timeout-s", type=float, default=3600.0)
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="A setting of the services in every run (repeatable)",
    )
    p.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="One more run with fair share on and this setting of the services (repeatable)",
    )
    p.add_argument("--out", type=Path, default=Path("bench-results/fairness.json"))
    return p.parse_args()


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Both modes on one NATS server and one Weaviate started for the run; the results."""
    data = load(args.dataset, args.documents, 0)
    docs = [as_added(d, BULK, "lib") for d in data.documents]
    print(f"tenant {BULK}: {len(docs)} documents", flush=True)
    ensure_installed()
    root = Path(tempfile.mkdtemp(prefix="kbus-fairness-"))
    nats_server = start_nats(root / "nats")
    weaviate_server = start_weaviate(root / "weaviate")
    servers = (
        f"nats://127.0.0.1:{nats_server.ports['client']}",
        weaviate_server.ports["http"],
        weaviate_server.ports["grpc"],
    )
    try:
        results = []
        base = tuple(setting.partition("=")[::2] for setting in args.set)
        modes = [Mode(False, base), Mode(True, base)]
        modes += [Mode(True, (*base, also.partition("=")[::2])) for also in args.also]
        for mode in modes:
            print(f"fair share {mode.label}", flush=True)
            results.append(await run_mode(mode, docs, servers, args, root / "logs"))
            print(json.dumps(results[-1]), flush=True)
    finally:
        nats_server.stop()
        weaviate_server.stop()
        shutil.rmtree(root, ignore_errors=True)
    save(args.out, results)
    return results


async def main() -> None:
    print(markdown(await run(_args())))


if __name__ == "__main__":
    asyncio.run(main())
