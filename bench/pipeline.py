"""kbus itself: ingestion through the services, and searches through the bus."""

from __future__ import annotations

import asyncio
import os
import time
import urllib.request
import uuid
from pathlib import Path

from kbus_client import KbClient
from kbus_dev.servers import Server
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from bench.corpus import Corpus, body
from bench.stats import percentiles

IN_FLIGHT = 64


def _stat_cpu_seconds(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def cpu_seconds(server: Server) -> float:
    """User + system CPU time a service process has used so far (from /proc)."""
    return _stat_cpu_seconds(Path(f"/proc/{server.proc.pid}/stat"))


def main_thread_cpu_seconds(server: Server) -> float:
    """CPU time of a service's main thread: its event loop (the bus, the framework, parsing).

    A service's model runs in other threads (a worker and onnxruntime's pool), so this splits
    the embedder's CPU into what the service adds and what the encoder costs.
    """
    pid = server.proc.pid
    return _stat_cpu_seconds(Path(f"/proc/{pid}/task/{pid}/stat"))


def metric(server: Server, name: str) -> Metric | None:
    """One metric family on a service's /metrics (None: the service has none by that name)."""
    url = f"http://127.0.0.1:{server.ports['http']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return next((f for f in text_string_to_metric_families(text) if f.name == name), None)


def histogram(server: Server, name: str) -> tuple[float, float]:
    """A Prometheus histogram's ``_sum`` and ``_count`` on a service's /metrics."""
    family = metric(server, name)
    if family is not None:
        samples = {sample.name: sample.value for sample in family.samples}
        return samples.get(f"{name}_sum", 0.0), samples.get(f"{name}_count", 0.0)
    return 0.0, 0.0


def histogram_mean_ms(before: tuple[float, float], after: tuple[float, float]) -> dict[str, float]:
    """Mean (ms) and count of what a histogram observed between two readings."""
    count = after[1] - before[1]
    return {"mean": (after[0] - before[0]) * 1000 / count if count else 0.0, "n": count}


def memory_kb(server: Server) -> dict[str, int]:
    """Resident and peak resident memory of a service process (from /proc)."""
    fields = {}
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return {"rss_kb": fields.get("VmRSS", 0), "peak_kb": fields.get("VmHWM", 0)}


async def lone_documents(
    kb: KbClient, corpus: Corpus, library: str, n: int = 20
) -> dict[str, float]:
    """Time to searchable (ms) of documents published one at a time on an idle pipeline.

    Each title gets a tag, so every chunk is new to the embedding cache and is embedded.
    """
    tag = uuid.uuid4().hex[:8]
    latencies = []
    for doc in corpus.documents[:n]:
        t0 = time.perf_counter()
        await kb.publish_document(
            library=library,
            document_id=f"{doc['_id']}-{tag}",
            title=f"{doc.get('title', '')} [{tag}]",
            text=body(doc),
            wait=True,
            timeout_s=600,
        )
        latencies.append((time.perf_counter() - t0) * 1000)
    return percentiles(latencies)


async def ingest(
    kb: KbClient, corpus: Corpus, library: str, version: str | None = None
) -> dict[str, object]:
    """Publish every document (at most ``IN_FLIGHT`` awaiting their receipt) and time it.

    ``version``: every document's version (None: derived from its content). A publish that
    JetStream drops as a duplicate (the same content within its 2-minute window) is counted:
    it costs nothing downstream, so a run full of them says nothing about the pipeline.
    """
    limit = asyncio.Semaphore(IN_FLIGHT)
    to_searchable: list[float] = []
    duplicates = 0

    async def one(doc: dict[str, str]) -> None:
        nonlocal duplicates
        async with limit:
            t0 = time.perf_counter()
            published = await kb.publish_document(
                library=library,
                document_id=doc["_id"],
                title=doc.get("title", ""),
                text=body(doc),
                version=version,
                wait=True,
                timeout_s=3_600,
            )
            to_searchable.append((time.perf_counter() - t0) * 1000)
            duplicates += published.duplicate

    started = time.perf_counter()
    await asyncio.gather(*(one(d) for d in corpus.documents))
    seconds = time.perf_counter() - started
    return {
        "documents": len(corpus.documents),
        "chunks": corpus.chunks,
        "seconds": seconds,
        "documents_per_s": len(corpus.documents) / seconds,
        "chunks_per_s": corpus.chunks / seconds,
        "time_to_searchable_ms": percentiles(to_searchable),
        "duplicates": duplicates,
        "version": version,
    }


class SearchRecorder:
    """Latencies and per-stage timings of searches through the bus, one setting of ``rerank``."""

    def __init__(self, concurrency: int, rerank: bool | None) -> None:
        self.concurrency = concurrency
        self.rerank = rerank
        self.totals: list[float] = []
        self.stages: dict[str, list[float]] = {
            "embed": [],
            "search": [],
            "rerank": [],
            "server": [],
        }
        self.seconds = 0.0

    async def search(self, kb: KbClient, query: str, library: str) -> None:
        """One search, timed from the client's side."""
        t0 = time.perf_counter()
        # min_similarity -1: every query runs every stage, whatever its answer.
        reply = await kb.search(
            query, libraries=[library], rerank=self.rerank, min_similarity=-1, timeout_s=600
        )
        self.totals.append((time.perf_counter() - t0) * 1000)
        self.stages["embed"].append(reply.timings.embed_ms)
        self.stages["search"].append(reply.timings.search_ms)
        self.stages["rerank"].append(reply.timings.rerank_ms)
        self.stages["server"].append(reply.timings.total_ms)

    def summary(self) -> dict[str, object]:
        seconds = self.seconds or sum(self.totals) / 1000
        return {
            "concurrency": self.concurrency,
            "rerank": self.rerank,
            "queries": len(self.totals),
            "queries_per_s": len(self.totals) / seconds,
            "latency_ms": percentiles(self.totals),
            "stages_ms": {name: percentiles(values) for name, values in self.stages.items()},
        }


async def query_load(
    kb: KbClient, queries: list[str], library: str, concurrency: int, rerank: bool | None = None
) -> dict[str, object]:
    """Latency, per-stage timings and throughput of searches at a concurrency (``rerank``: as
    the request's, None for the default chain)."""
    limit = asyncio.Semaphore(concurrency)
    recorder = SearchRecorder(concurrency, rerank)

    async def one(query: str) -> None:
        async with limit:
            await recorder.search(kb, query, library)

    started = time.perf_counter()
    await asyncio.gather(*(one(q) for q in queries))
    recorder.seconds = time.perf_counter() - started
    return recorder.summary()
