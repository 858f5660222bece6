"""One agent step seen across every hop, in a real Jaeger: every service with tracing on.

The agent (tests/e2e/agent.py, a process of its own with its own tracer provider) publishes a
document, waits for it to be indexed, and calls kbus as a tool. Its trace must hold spans of
the ingestor, the embedder, the searcher and the reranker, each under the span that caused it.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from kbus_dev.observability import start_jaeger
from kbus_dev.services import service_env, start_all

from tests.conftest import Servers
from tests.helpers import TEST_STORAGE

SERVICES = ("kbus-ingestor", "kbus-embedder", "kbus-searcher", "kbus-reranker")


@dataclass(frozen=True)
class Traced:
    nats_url: str
    prefix: str
    otlp: str
    ui_port: int


@pytest.fixture(scope="module")
def traced(servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traced]:
    root: Path = tmp_path_factory.mktemp("tracing")
    jaeger = start_jaeger(root / "jaeger")
    tag = uuid.uuid4().hex[:8]
    otlp = f"http://127.0.0.1:{jaeger.ports['otlp']}"
    env = service_env(
        servers.nats_url,
        servers.weaviate_http,
        servers.weaviate_grpc,
        prefix=f"tr{tag}",
        collection=f"Tr{tag}",
        extra={
            **TEST_STORAGE,
            "KBUS_TRACING_ENDPOINT": otlp,
            "KBUS_TRACING_SCHEDULE_DELAY_MS": "100",
        },
    )
    try:
        running = start_all(env, root / "logs")
    except BaseException:
        jaeger.stop()
        raise
    try:
        yield Traced(servers.nats_url, f"tr{tag}", otlp, jaeger.ports["ui"])
    finally:
        for server in running:
            server.stop()
        jaeger.stop()


@dataclass(frozen=True)
class Span:
    id: str
    parent: str | None
    name: str
    service: str


def _spans(trace: dict[str, Any]) -> dict[str, Span]:
    services = {key: p["serviceName"] for key, p in trace["processes"].items()}
    spans = {}
    for s in trace["spans"]:
        parents = [r["spanID"] for r in s.get("references", []) if r["refType"] == "CHILD_OF"]
        spans[s["spanID"]] = Span(
            s["spanID"],
            parents[0] if parents else None,
            s["operationName"],
            services[s["processID"]],
        )
    return spans


def _trace(ui_port: int, trace_id: str, until: float) -> dict[str, Span]:
    """The trace once spans of every service on the path have arrived and every span's parent with
    them (each service exports its spans in batches of its own, so a child can arrive first)."""
    spans: dict[str, Span] = {}
    while time.monotonic() < until:
        response = httpx.get(f"http://127.0.0.1:{ui_port}/api/traces/{trace_id}", timeout=5)
        if response.status_code == 200 and response.json().get("data"):
            spans = _spans(response.json()["data"][0])
            whole = all(s.parent is None or s.parent in spans for s in spans.values())
            if whole and set(SERVICES) <= {s.service for s in spans.values()}:
                return spans
        time.sleep(0.5)
    return spans


def _path(spans: dict[str, Span], leaf: Span) -> list[Span]:
    """A span and its ancestors, up to the root."""
    path = [leaf]
    while path[-1].parent is not None:
        parent = spans.get(path[-1].parent)
        assert parent is not None, f"{path[-1].name}'s parent is missing from the trace"
        path.append(parent)
    return path


def _one(spans: dict[str, Span], service: str, name: str) -> Span:
    found = [s for s in spans.values() if s.service == service and s.name == name]
    assert found, (
        f"no span {name!r} of {service}: {sorted({(s.service, s.name) for s in spans.values()})}"
    )
    return found[0]


def _services_up(path: list[Span]) -> list[str]:
    """The services a path passes through, each once, from the leaf up."""
    seen: list[str] = []
    for span in path:
        if not seen or seen[-1] != span.service:
            seen.append(span.service)
    return seen


def test_one_trace_holds_every_service_each_span_under_its_cause(traced: Traced) -> None:
    agent = subprocess.run(
        [sys.executable, "-m", "tests.e2e.agent", traced.nats_url, traced.prefix, traced.otlp],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert agent.returncode == 0, agent.stderr[-3000:]
    trace_id = agent.stdout.strip().splitlines()[-1]
    spans = _trace(traced.ui_port, trace_id, time.monotonic() + 60)
    assert set(SERVICES) <= {s.service for s in spans.values()}
    _print_tree(spans)
    [root] = [s for s in spans.values() if s.parent is None]
    assert (root.service, root.name) == ("agent", "agent step")

    # The search: tool call -> searcher -> embedder and reranker; Weaviate inside the searcher.
    rerank = _one(spans, "kbus-reranker", "kb.rerank")
    assert [s.name for s in _path(spans, rerank)] == [
        "kb.rerank",
        "ask reranker",
        "kb.search",
        "ask searcher",
        "kbus search",
        "tool.search_handbook",
        "agent step",
    ]
    # The query's embedding, and (on a library's first search) its baseline's probes, both
    # inside the search.
    embeds = [s for s in spans.values() if (s.service, s.name) == ("kbus-embedder", "kb.embed")]
    paths = [[s.name for s in _path(spans, embed)] for embed in embeds]
    assert ["kb.embed", "ask embedder", "kb.search"] in [path[:3] for path in paths], paths
    assert all("kb.search" in path for path in paths), paths
    hybrid = _one(spans, "kbus-searcher", "weaviate hybrid")
    assert spans[hybrid.parent or ""].name == "kb.search"

    # The document: publish -> ingestor -> embedder -> indexer (in the searcher) -> Weaviate.
    insert = _one(spans, "kbus-searcher", "weaviate insert")
    path = _path(spans, insert)
    assert _services_up(path) == [
        "kbus-searcher",
        "kbus-embedder",
        "kbus-ingestor",
        "agent",
    ], [(s.service, s.name) for s in path]
    assert [s.name for s in path][-2:] == ["kbus publish", "agent step"]


def _print_tree(spans: dict[str, Span]) -> None:
    children: dict[str | None, list[Span]] = {}
    for s in spans.values():
        children.setdefault(s.parent, []).append(s)

    def walk(parent: str | None, depth: int) -> None:
        for s in children.get(parent, []):
            print("  " * depth + f"{s.service}: {s.name}")
            walk(s.id, depth + 1)

    walk(None, 0)
