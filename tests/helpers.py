"""Small helpers the integration and end-to-end tests share."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
from kbus_contract import (
    Chunk,
    ChunksReady,
    ContentType,
    DocumentRef,
    EmbeddedChunk,
    EmbeddingsReady,
    SearchReply,
)
from kbus_contract.backlog import stage_backlog
from kbus_contract.identifiers import chunk_id
from kbus_contract.tenancy import GRANT_ALL
from kbus_contract.topology import Topology
from kbus_dev.servers import Server
from kbus_dev.services import service_env, start_all
from kbus_ingestor.chunking import ChunkingConfig, Span, iter_spans
from kbus_runtime.analysis import keyword_text
from kbus_runtime.chat import READY_CHECK
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.errors import NoRespondersError
from nats.js.api import ConsumerConfig, DeliverPolicy, StreamInfo
from nats.js.errors import NotFoundError

if TYPE_CHECKING:
    from kbus_searcher.store.writes import ChunkWriter

#: Storage limits for the services a test starts on a shared NATS. JetStream reserves each
#: stream's and bucket's max bytes from the server's store, so the defaults (GiBs) would add up
#: across a session to more than a small disk gives.
TEST_STORAGE = {
    "KBUS_STREAM_MAX_BYTES": str(64 * 1024**2),
    "KBUS_EMBEDDER_CACHE_MAX_BYTES": str(64 * 1024**2),
    "KBUS_EMBEDDER_TOKEN_STATES_MAX_BYTES": str(256 * 1024**2),
}


#: Budgets a test that drains one stage alone sets (no next stage runs to take what it makes).
UNBOUNDED = {
    "KBUS_DEFAULT_BUDGET": json.dumps(
        {"chunk_messages": 1_000_000, "embedding_messages": 1_000_000}
    )
}


async def metric(port: int, pattern: str) -> float:
    """The sum of a service's samples matching ``pattern`` (one group: the value) on its
    metrics page at ``port``. A session's stack is shared, so counters hold earlier tests' work
    too: a test compares a reading with its own earlier one, never with zero."""
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    return sum(float(value) for value in re.findall(pattern, text))


@contextlib.contextmanager
def own_services(
    nats_url: str,
    weaviate: tuple[int, int],
    log_dir: Path,
    name: str,
    extra: dict[str, str] | None = None,
) -> Iterator[tuple[dict[str, str], dict[str, Server]]]:
    """Every service as a process, in a namespace of its own (bus prefix and collection named
    ``name`` and a random tag), stopped afterwards; yields their environment and them."""
    tag = uuid.uuid4().hex[:8]
    env = service_env(
        nats_url,
        *weaviate,
        prefix=f"{name}{tag}",
        collection=f"{name.capitalize()}{tag}",
        extra={**TEST_STORAGE, **(extra or {})},
    )
    # A test may start a service again in its place: what the dict holds at the end stops.
    running = {server.name: server for server in start_all(env, log_dir)}
    try:
        yield env, running
    finally:
        for server in running.values():
            server.stop()


async def drop_namespace(nc: Client, prefix: str) -> list[str]:
    """Delete the streams, buckets and object stores of one bus prefix (what a test declared),
    so that the storage the server reserves for them is given back; returns their names."""
    js = nc.jetstream()
    stem = f"{prefix.upper()}_"
    names = [n for n in await stream_names(nc) if _unwrapped(n).startswith(stem)]
    for name in names:
        with contextlib.suppress(NotFoundError):
            await js.delete_stream(name)
    return names


async def stream_names(nc: Client) -> list[str]:
    """Every stream on the server, page by page."""
    js, names = nc.jetstream(), list[str]()
    while page := await js.streams_info(offset=len(names)):
        names += [info.config.name or "" for info in page]
    return names


def _unwrapped(stream: str) -> str:
    """A stream's name without the prefix JetStream gives a bucket's or object store's."""
    return stream.removeprefix("KV_").removeprefix("OBJ_")


async def read_stream(
    nc: Client, subject: str, *, count: int, timeout_s: float = 30.0
) -> list[dict[str, Any]]:
    """Read ``count`` messages on a subject from the start of its stream, without consuming."""
    js = nc.jetstream()
    sub = await js.subscribe(
        subject, ordered_consumer=True, config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL)
    )
    out: list[dict[str, Any]] = []
    try:
        async with asyncio.timeout(timeout_s):
            while len(out) < count:
                msg = await sub.next_msg(timeout=timeout_s)
                out.append(json.loads(msg.data))
    finally:
        await sub.unsubscribe()
    return out


async def publish_raw(
    nc: Client,
    topology: Topology,
    payload: bytes,
    tenant: str | None = None,
    library: str | None = None,
) -> None:
    """Store raw bytes in the documents stream as the gate would have accepted them on a
    tenant's library's ``document.added`` subject (by default the one the payload names, where
    it is JSON that names them): what a stage must withstand whatever reaches its stream."""
    named = _named(payload)
    tenant = tenant or str(named.get("tenant") or "t")
    library = library or str(named.get("library") or "lib")
    await nc.jetstream().publish(topology.accepted(topology.added(tenant, library)), payload)


def _named(payload: bytes) -> dict[str, Any]:
    with contextlib.suppress(ValueError, UnicodeDecodeError):
        loaded = json.loads(payload)
        if isinstance(loaded, dict):
            return loaded
    return {}


async def ask(
    nc: Client,
    topology: Topology,
    payload: bytes,
    *,
    kind: str = "search",
    grant: str = GRANT_ALL,
    timeout_s: float = 10.0,
    tenant: str | None = None,
) -> Msg:
    """A ``kb.search`` (or ``kb.stats``, ``kb.profile``, ``kb.readprofile``) request on the
    subject of ``tenant``, by default the tenant its payload names (``t`` where it names none)."""
    tenant = tenant or str(_named(payload).get("tenant") or "t")
    subject = topology.asked(f"kb.{kind}", tenant, grant)
    return await nc.request(subject, payload, timeout=timeout_s)


def document(
    tenant: str,
    library: str,
    doc_id: str,
    text: str,
    title: str = "",
    content_type: str = "text/plain",
    **extra: Any,
) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "library": library,
        "document_id": doc_id,
        "title": title or doc_id,
        "text": text,
        "source_uri": f"test://{doc_id}",
        "content_type": content_type,
        **extra,
    }


async def take_work(
    nc: Client, subject: str, durable: str, *, count: int, timeout_s: float = 30.0
) -> list[dict[str, Any]]:
    """Consume ``count`` messages from a work-queue stream, as the next stage would."""
    sub = await nc.jetstream().pull_subscribe(subject, durable=durable)
    out: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout_s):
        while len(out) < count:
            try:
                msgs = await sub.fetch(count - len(out), timeout=1.0)
            except TimeoutError:
                continue
            for msg in msgs:
                out.append(json.loads(msg.data))
                await msg.ack()
    return out


async def unsettled(nc: Client, topology: Topology, stage: str) -> int:
    """Messages a stage holds (waiting or in flight), through its durable or its lanes."""
    held = await stage_backlog(nc.jetstream(), topology, topology.stage(stage))
    return held.pending + held.in_flight


async def find_in_stream(
    nc: Client, subject: str, match: dict[str, Any], timeout_s: float = 30.0
) -> dict[str, Any]:
    """The first message on a subject (from the start of its stream) whose fields match."""
    js = nc.jetstream()
    sub = await js.subscribe(
        subject, ordered_consumer=True, config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL)
    )
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                data = json.loads((await sub.next_msg(timeout=timeout_s)).data)
                if all(data.get(k) == v for k, v in match.items()):
                    return dict(data)
    finally:
        await sub.unsubscribe()


async def request_when_served(
    nc: Client,
    subject: str,
    payload: bytes,
    *,
    timeout_s: float = 10.0,
    headers: dict[str, str] | None = None,
) -> Msg:
    """A request, sent again while nobody subscribes to its subject yet.

    A subscriber that has just started may not have its subscription at the server yet (the
    answer is "no responders": the request reached no one, so sending it again counts nothing
    twice).
    """
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            return await nc.request(subject, payload, timeout=timeout_s, headers=headers)
        except NoRespondersError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.05)


def chunks_ready(tenant: str, document: int, texts: Sequence[str]) -> bytes:
    """A ``chunks.ready`` message of document ``d<document>`` with these chunk texts."""
    ref = DocumentRef(
        tenant=tenant,
        library="lib",
        document_id=f"d{document}",
        version="v",
        title=f"Document {document}",
        source_uri="",
        content_type=ContentType.PLAIN,
        metadata={},
    )
    chunks = tuple(
        Chunk(chunk_id=str(uuid.uuid4()), position=p, char_start=0, char_end=1, text=text)
        for p, text in enumerate(texts)
    )
    return ChunksReady(document=ref, chunks=chunks).model_dump_json().encode()


#: The vector length of :func:`ready`'s chunks.
DIM = 8


def unit_vector(seed: int) -> tuple[float, ...]:
    """A random unit vector of :data:`DIM` values, the same for the same seed."""
    v = np.random.default_rng(seed).normal(size=DIM)
    return tuple(float(x) for x in v / np.linalg.norm(v))


def ready(
    tenant: str,
    library: str,
    doc_id: str,
    version: str,
    texts: list[str],
    seed: int = 0,
    dim: int = DIM,
    metadata: dict[str, object] | None = None,
    sequence: int = 1,
) -> EmbeddingsReady:
    """An ``embeddings.ready`` message of one document, as the embedder would publish it
    (model ``test``; chunk ``i`` has the vector of seed ``seed + i``)."""
    ref = DocumentRef(
        tenant=tenant,
        library=library,
        document_id=doc_id,
        version=version,
        title=doc_id,
        source_uri="",
        content_type=ContentType.PLAIN,
        metadata=metadata or {},
        sequence=sequence,
    )
    chunks = tuple(
        EmbeddedChunk(
            chunk_id=chunk_id(tenant, library, doc_id, version, i),
            position=i,
            text=t,
            char_start=0,
            char_end=len(t),
            keywords=keyword_text(doc_id, (), t),
            vector=unit_vector(seed + i)[:dim] if dim <= DIM else (0.1,) * dim,
        )
        for i, t in enumerate(texts)
    )
    return EmbeddingsReady(
        document=ref, model="test", dimension=dim, total_chunks=len(chunks), chunks=chunks
    )


async def upsert(writer: ChunkWriter, ready: EmbeddingsReady) -> None:
    """Write one document's chunks as the indexer does; raise unless every object was stored."""
    [error] = await writer.write([ready])
    if error is not None:
        raise error


async def led_stream_info(nc: Client, stream: str, timeout_s: float = 60.0) -> StreamInfo:
    """A clustered stream's info once it has a leader (asked until then: after a kill, the
    cluster takes a few seconds to elect one)."""
    async with asyncio.timeout(timeout_s):
        while True:
            try:
                info = await nc.jetstream(timeout=2.0).stream_info(stream)
                if info.cluster is not None and info.cluster.leader:
                    return info
            except (NatsError, TimeoutError):  # an election is under way
                pass
            await asyncio.sleep(0.2)


async def kill_stream_leader(
    nc: Client, servers: list[Server], stream: str, pause_s: float = 0.0
) -> str:
    """SIGKILL the server leading ``stream`` (read from the stream's info), start it again
    after ``pause_s``; returns its name."""
    info = await led_stream_info(nc, stream)
    assert info.cluster is not None
    name = str(info.cluster.leader)
    victim = by_name(servers, name)
    victim.kill()
    await asyncio.sleep(pause_s)
    victim.restart()
    return name


#: Words a model server's tests make random texts of.
HOUSEHOLD_WORDS = [
    "pump",
    "valve",
    "filter",
    "gasket",
    "hose",
    "rake",
    "kettle",
    "toaster",
    "garden",
    "winter",
    "boils",
    "leaks",
]


class LLMRecorder:
    """A loopback relay in front of a real LLM server that keeps each chat request and answer
    it passes on. A llama.cpp server reuses the cached part of a prompt, and a greedy answer
    can change with it, so the same prompt asked again is no reference: what the service was
    told is. With ``delay_s``, each request is held that long first (a model with a queue);
    each of ``faults`` (status, headers) answers one request in its place, in order (a server
    that is overloaded or refuses)."""

    def __init__(self, upstream: str, delay_s: float = 0.0) -> None:
        self.upstream = upstream.rstrip("/")
        self.delay_s = delay_s
        self.asked: list[Any] = []
        self.answers: list[str] = []
        self.faults: list[tuple[int, dict[str, str]]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> LLMRecorder:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        recorder = self

        class Relay(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                path = self.path.removeprefix("/v1")
                asked = json.loads(body)
                # A service's readiness check (a profile being set) is passed on, not kept.
                checking = [m["content"] for m in asked.get("messages", [])] == list(READY_CHECK)
                if not checking:
                    recorder.asked.append(asked)
                time.sleep(recorder.delay_s)
                if recorder.faults:
                    status, headers = recorder.faults.pop(0)
                    self._answer(status, b'{"error": "injected"}', headers)
                    return
                answer = httpx.post(
                    f"{recorder.upstream}{path}",
                    content=body,
                    headers={"Content-Type": "application/json"},
                    timeout=300,
                )
                if answer.status_code == 200 and not checking and "choices" in answer.json():
                    recorder.answers.append(answer.json()["choices"][0]["message"]["content"])
                self._answer(answer.status_code, answer.content)

            def _answer(
                self, status: int, body: bytes, headers: dict[str, str] | None = None
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: pytest shows what matters."""

        return Relay


# Three passages unlike each other, for the token-state and MaxSim tests.
PASSAGES = [
    "A woman is playing violin in an orchestra.",
    "Mice lacking the receptor gained weight on a high-fat diet, unlike wild-type mice.",
    "The committee met on Tuesday to discuss the budget for next year, which was approved "
    "after a long debate about roads, schools and the library.",
]


def make_beir(root: Path) -> Path:
    """A tiny BEIR folder: four documents, three queries, each judged once."""
    root.mkdir(parents=True, exist_ok=True)
    docs = [
        {"_id": "d1", "title": "Cats", "text": "Cats purr when they are content."},
        {"_id": "d2", "title": "Dogs", "text": "Dogs bark at the postman every morning."},
        {"_id": "d3", "title": "Bees", "text": "Bees make honey from the nectar of flowers."},
        {"_id": "q3", "title": "Self", "text": "A document whose id is also a query id."},
    ]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    queries = [
        {"_id": "q1", "text": "why do cats purr"},
        {"_id": "q2", "text": "honey bees"},
        {"_id": "q3", "text": "a document whose id is also a query id"},
    ]
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t1\nq3\td2\t1\n"
    )
    return root


def cli_env(nats_url: str, prefix: str, tenant: str) -> dict[str, str]:
    """The environment of a ``kbus`` process run against a test stack."""
    return {
        **os.environ,
        "KBUS_NATS_URL": nats_url,
        "KBUS_BUS_PREFIX": prefix,
        "KBUS_TENANT": tenant,
    }


TOPICS = ("boilers", "badges", "lunch", "parking", "printers", "keys")


def made_up_beir(root: Path, documents: int, queries: int) -> Path:
    """A BEIR folder of made-up documents (SciFact need not be beside the repository)."""
    root.mkdir()
    docs = [
        {
            "_id": f"d{i}",
            "title": f"Note {i} on {TOPICS[i % len(TOPICS)]}",
            "text": f"Item {i}: the {TOPICS[i % len(TOPICS)]} rule number {i} says to ask "
            f"the desk on floor {i % 7} before noon. " * 12,
        }
        for i in range(documents)
    ]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    asked = [
        {"_id": f"q{i}", "text": f"what does rule {i} say about {TOPICS[i % 6]}?"}
        for i in range(queries)
    ]
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in asked) + "\n")
    (root / "qrels").mkdir()
    rows = ["query-id\tcorpus-id\tscore", *(f"q{i}\td{i}\t1" for i in range(queries))]
    (root / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    return root


def search_reply(*documents: str, **fields: Any) -> SearchReply:
    """A search's reply holding one hit per named document (``fields`` override the rest)."""
    from kbus_contract import Scores, SearchHit, SearchType, StageTimings

    hits = tuple(
        SearchHit(
            chunk_id=d,
            document_id=d,
            library="lib",
            title="",
            text=f"the text of {d}",
            heading_path=(),
            source_uri="",
            char_start=0,
            char_end=0,
            position=0,
            version="v",
            metadata={},
            scores=Scores(final=1.0),
        )
        for d in documents
    )
    made: dict[str, Any] = {
        "results": hits,
        "searched": True,
        "no_match": not hits,
        "candidates": len(hits),
        "search_type": SearchType.HYBRID,
        "alpha": 0.5,
        "min_score": 0.0,
        "score_kind": "fused",
        "model": "m",
        "reranker": "",
        "timings": StageTimings(),
    }
    return SearchReply(**{**made, **fields})


def split_text(text: str, config: ChunkingConfig) -> list[Span]:
    """Every chunk of a whole text, as the recursive chunker cuts it."""
    return list(iter_spans(text, 0, len(text), config))


_PROSE = "the report describes the plans of each team for the year with its risks"


def unique_text(tag: str, chars: int) -> str:
    """About ``chars`` characters of prose whose every 60-character segment holds a token no
    other text of another ``tag`` holds: no chunk of it is in any cache."""
    words = _PROSE.split()
    segments = []
    for n in range(max(1, chars // 60)):
        body = " ".join(words[(n + i) % len(words)] for i in range(6))
        segments.append(f"{tag}{n:x} {body}"[:59].ljust(59))
    return " ".join(segments)


def by_name(servers: list[Server], name: str) -> Server:
    """The server called ``name`` (``n1``..)."""
    return servers[int(name.removeprefix("n")) - 1]
