"""Least-privilege NATS users for kbus: a nats-server authorization block and its secret.

Every service gets its own user that may publish and subscribe only where its stage needs to,
use only its own durable consumers, and receive replies only on its own inbox prefix
(``_INBOX_<user>``), so no client can read another's replies. Streams, the tombstone bucket and
consumers of other stages are out of reach; only the ``admin`` user (the setup job) manages
streams.
"""

from __future__ import annotations

import argparse
import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from kbus_contract.catalog import CHANNELS
from kbus_contract.topology import Topology

USERS = ("admin", "ingestor", "embedder", "searcher", "reranker", "client")


@dataclass
class Permissions:
    """What one user may do."""

    publish: list[str] = field(default_factory=list)
    subscribe: list[str] = field(default_factory=list)
    allow_responses: bool = False


def inbox(user: str) -> str:
    """The inbox prefix a user's connections must use."""
    return f"_INBOX_{user}"


def _consumer(stream: str, durable: str, filter_subject: str) -> list[str]:
    """Bind to, pull from and ack one durable consumer (and create it if missing)."""
    return [
        f"$JS.API.CONSUMER.INFO.{stream}.{durable}",
        f"$JS.API.CONSUMER.CREATE.{stream}.{durable}.{filter_subject}",
        f"$JS.API.CONSUMER.CREATE.{stream}.{durable}",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{durable}",
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}",
        f"$JS.ACK.{stream}.{durable}.>",
    ]


def _reader(stream: str) -> list[str]:
    """Create, delete and flow-control ephemeral ordered consumers on a stream."""
    return [
        f"$JS.API.CONSUMER.CREATE.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}.>",
        f"$JS.API.CONSUMER.DELETE.{stream}.>",
        f"$JS.API.CONSUMER.INFO.{stream}.>",
        f"$JS.FC.{stream}.>",
    ]


def _kv(bucket: str) -> list[str]:
    """Read and write one key-value bucket (not create it)."""
    return [
        f"$JS.API.STREAM.INFO.KV_{bucket}",
        # Batched reads (many keys in one request) go to the stream's own subject.
        f"$JS.API.DIRECT.GET.KV_{bucket}",
        f"$JS.API.DIRECT.GET.KV_{bucket}.>",
        f"$JS.API.STREAM.MSG.GET.KV_{bucket}",
        f"$KV.{bucket}.>",
    ]


def _bodies(t: Topology, *, write: bool) -> list[str]:
    """The claim-check object store: the client stores texts, the ingestor reads and removes."""
    stream = f"OBJ_{t.bodies_bucket}"
    rights = [
        f"$JS.API.STREAM.INFO.{stream}",
        f"$JS.API.STREAM.MSG.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}.>",
        f"$JS.API.STREAM.PURGE.{stream}",
        f"$O.{t.bodies_bucket}.M.>",
    ]
    if write:
        rights.append(f"$O.{t.bodies_bucket}.C.>")
    else:
        # nats-py reads an object through an ordered consumer found by subject.
        rights.extend([*_reader(stream), "$JS.API.STREAM.NAMES"])
    return rights


def _stream_checks(t: Topology) -> list[str]:
    return ["$JS.API.INFO", *(f"$JS.API.STREAM.INFO.{s.name}" for s in t.streams)]


def _served(t: Topology, receiver: str) -> list[str]:
    """The request subjects a service answers (kbus_contract.catalog) and the discovery subjects
    of its NATS micro service ($SRV.PING/INFO/STATS)."""
    entries = [entry for entry in CHANNELS if entry.receiver == receiver]
    [service] = {entry.micro for entry in entries}
    return [
        *(entry.subject(t) for entry in entries),
        *(
            subject
            for verb in ("PING", "INFO", "STATS")
            for subject in (f"$SRV.{verb}", f"$SRV.{verb}.{service}", f"$SRV.{verb}.{service}.*")
        ),
    ]


def permissions(t: Topology) -> dict[str, Permissions]:
    """The permissions of every kbus user on one installation (one bus prefix)."""
    return {
        "admin": Permissions(publish=["$JS.API.>", "$KV.>"], subscribe=[f"{inbox('admin')}.>"]),
        "ingestor": Permissions(
            publish=[
                *_stream_checks(t),
                *_consumer(t.documents_stream.name, t.ingestor_durable, t.document_added),
                t.chunks_ready,
                *_bodies(t, write=False),
                t.dead_letter("ingestor"),
                t.document_failed,
            ],
            subscribe=[f"{inbox('ingestor')}.>"],
        ),
        "embedder": Permissions(
            publish=[
                *_stream_checks(t),
                *_consumer(t.chunks_stream.name, t.embedder_durable, t.chunks_ready),
                t.embeddings_ready,
                *_kv(t.embed_cache_bucket),
                t.dead_letter("embedder"),
                t.document_failed,
            ],
            subscribe=[f"{inbox('embedder')}.>", *_served(t, "embedder")],
            allow_responses=True,
        ),
        "searcher": Permissions(
            publish=[
                *_stream_checks(t),
                *_consumer(t.embeddings_stream.name, t.indexer_durable, t.embeddings_ready),
                *_consumer(t.documents_stream.name, t.deleter_durable, t.document_deleted),
                *_kv(t.tombstones_bucket),
                *_kv(t.versions_bucket),
                # Searchers follow the versions and tombstones buckets with key-value watches
                # (nats-py finds a bucket's stream by subject).
                *_reader(f"KV_{t.versions_bucket}"),
                *_reader(f"KV_{t.tombstones_bucket}"),
                "$JS.API.STREAM.NAMES",
                t.document_indexed,
                t.document_removed,
                t.dead_letter("indexer"),
                t.document_failed,
                # The dead-letterer: advisories in, the named message read, recorded, removed.
                *_consumer(
                    t.advisories_stream.name, t.advisory_durable, t.max_deliveries_advisories
                ),
                *(f"$JS.API.STREAM.MSG.GET.{s.name}" for s in t.work_streams),
                *(f"$JS.API.STREAM.MSG.DELETE.{s.name}" for s in t.work_streams),
                t.dead_letter("ingestor"),
                t.dead_letter("embedder"),
                t.embed,
                t.rerank,
            ],
            subscribe=[f"{inbox('searcher')}.>", *_served(t, "searcher")],
            allow_responses=True,
        ),
        "reranker": Permissions(
            publish=[*_stream_checks(t)],
            subscribe=[f"{inbox('reranker')}.>", *_served(t, "reranker")],
            allow_responses=True,
        ),
        "client": Permissions(
            publish=[
                t.document_added,
                t.document_deleted,
                t.search,
                t.stats,
                *(f"$JS.API.STREAM.INFO.{s.name}" for s in t.streams),
                # Ordered consumers that read receipts and dead letters (kbus_client).
                *_reader(t.receipts_stream.name),
                *_reader(t.dead_letter_stream.name),
                *_bodies(t, write=True),
            ],
            subscribe=[
                f"{inbox('client')}.>",
                t.document_indexed,
                t.document_removed,
                t.dead_letters,
            ],
        ),
    }


def server_config(t: Topology, passwords: dict[str, str]) -> str:
    """The ``authorization`` block of nats-server's configuration."""
    users = []
    for user, perms in permissions(t).items():
        entry = {
            "user": user,
            "password": passwords[user],
            "permissions": {
                "publish": {"allow": perms.publish},
                "subscribe": {"allow": perms.subscribe},
            },
        }
        if perms.allow_responses:
            entry["permissions"]["allow_responses"] = True  # type: ignore[index]
        users.append(entry)
    # JSON is valid nats-server configuration syntax.
    return "authorization: " + json.dumps({"users": users}, indent=2) + "\n"


def k8s_secret(passwords: dict[str, str]) -> str:
    """The Kubernetes Secret the Deployments read their passwords from."""
    lines = [
        "apiVersion: v1",
        "kind: Secret",
        "metadata:",
        "  name: kbus-nats-users",
        "type: Opaque",
        "stringData:",
    ]
    lines += [f"  {user}: {json.dumps(password)}" for user, password in passwords.items()]
    return "\n".join(lines) + "\n"


def generate_passwords() -> dict[str, str]:
    return {user: secrets.token_urlsafe(24) for user in USERS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbus_dev nats-auth")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--prefix", default="", help="bus prefix of the installation")
    args = parser.parse_args(argv)
    passwords = generate_passwords()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "auth.conf").write_text(server_config(Topology(args.prefix), passwords))
    (args.out / "nats-users-secret.yaml").write_text(k8s_secret(passwords))
    for path in (args.out / "auth.conf", args.out / "nats-users-secret.yaml"):
        path.chmod(0o600)
    print(f"wrote {args.out}/auth.conf and {args.out}/nats-users-secret.yaml (keep them secret)")
    return 0
