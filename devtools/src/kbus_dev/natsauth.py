"""Least-privilege NATS users for kbus: a nats-server authorization block, and credentials.

Every service gets its own user that may publish and subscribe only where its stage needs to,
use only its own durable consumers, and receive replies only on its own inbox prefix
(``_INBOX_<user>``), so no client can read another's replies. Streams, the tombstone bucket and
consumers of other stages are out of reach; only the ``admin`` user (the setup job) manages
streams.

Each tenant credential (``--credential``) reaches its tenant's subjects only, and of those only
its libraries' when it names some: publishing and deleting documents (unless read-only), its
grant's search and statistics subjects, consumers of its receipts and dead letters filtered to
them, and its tenant's store of large texts (docs/security.md).
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kbus_contract.catalog import CHANNELS
from kbus_contract.tenancy import grant_token
from kbus_contract.topology import Topology

SERVICES = ("admin", "ingestor", "generator", "embedder", "searcher", "reranker")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class Credential:
    """A tenant's credential: which tenant, which of its libraries (None: all), and whether it
    may write (publish and delete documents) or only read (search, statistics, receipts)."""

    name: str
    tenant: str
    libraries: tuple[str, ...] | None = None
    write: bool = True

    @classmethod
    def parse(cls, text: str) -> Credential:
        """``NAME=TENANT[:LIB+LIB...][:read|write]``, or just ``TENANT`` (named as it, every
        library, read and write)."""
        name, _, rest = text.partition("=") if "=" in text else (text, "", text)
        tenant, *more = rest.split(":")
        libraries: tuple[str, ...] | None = None
        write = True
        for part in more:
            if part in ("read", "write"):
                write = part == "write"
            elif part and part != "*":
                libraries = tuple(sorted(set(part.split("+"))))
        for token in (name, tenant, *(libraries or ())):
            if not _NAME.match(token) or token in SERVICES:
                raise ValueError(f"{token!r} is not a valid credential, tenant or library name")
        grant_token(libraries)  # the grant fits in a subject
        return cls(name, tenant, libraries, write)

    @property
    def grant(self) -> str:
        return grant_token(self.libraries)


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
    return [*_kv_reads(bucket), f"$KV.{bucket}.>"]


def _kv_reads(bucket: str) -> list[str]:
    """Read one key-value bucket."""
    return [
        f"$JS.API.STREAM.INFO.KV_{bucket}",
        # Batched reads (many keys in one request) go to the stream's own subject.
        f"$JS.API.DIRECT.GET.KV_{bucket}",
        f"$JS.API.DIRECT.GET.KV_{bucket}.>",
        f"$JS.API.STREAM.MSG.GET.KV_{bucket}",
    ]


def _bodies(t: Topology, tenant: str, *, write: bool) -> list[str]:
    """A tenant's claim-check object store: its credentials create it and store texts, the
    ingestor reads and removes them."""
    bucket = t.bodies_bucket(tenant)
    stream = f"OBJ_{bucket}"
    rights = [
        f"$JS.API.STREAM.INFO.{stream}",
        f"$JS.API.STREAM.MSG.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}.>",
        f"$JS.API.STREAM.PURGE.{stream}",
        f"$O.{bucket}.M.>",
    ]
    if write:
        rights += [f"$JS.API.STREAM.CREATE.{stream}", f"$O.{bucket}.C.>"]
    else:
        # nats-py reads an object through an ordered consumer found by subject.
        rights += [*_reader(stream), "$JS.API.STREAM.NAMES"]
    return rights


def _stream_checks(t: Topology) -> list[str]:
    """Check the streams exist; read every stream's and stage's figures for /metrics."""
    return [
        "$JS.API.INFO",
        *(f"$JS.API.STREAM.INFO.{s.name}" for s in t.streams),
        *(f"$JS.API.CONSUMER.INFO.{s.stream}.{s.durable}" for s in t.stages),
    ]


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


def _filtered_reader(stream: str, subject: str) -> list[str]:
    """Create (by name, with its filter in the request's subject), inspect, delete and ack a
    consumer of ``stream`` that reads ``subject`` only."""
    return [
        f"$JS.API.CONSUMER.CREATE.{stream}.*.{subject}",
        f"$JS.API.CONSUMER.INFO.{stream}.*",
        f"$JS.API.CONSUMER.DELETE.{stream}.*",
        f"$JS.ACK.{stream}.>",
    ]


def tenant_permissions(t: Topology, credential: Credential) -> Permissions:
    """What one tenant's credential may do: its tenant's subjects, only its libraries'."""
    tenant, libraries = credential.tenant, credential.libraries
    scopes: list[str | None] = list(libraries) if libraries else [None]
    publish = [
        t.search_for(tenant, credential.grant),
        t.stats_for(tenant, credential.grant),
        t.readprofile_for(tenant, credential.grant),
    ]
    subscribe = [f"{inbox(credential.name)}.>"]
    for library in scopes:
        publish += _filtered_reader(t.receipts_stream.name, t.indexed_of(tenant, library))
        publish += _filtered_reader(t.dead_letter_stream.name, t.dead_letters_of(tenant, library))
        if credential.write:
            publish += [t.added(tenant, library or "*"), t.deleted(tenant, library or "*")]
        subscribe.append(t.removed(tenant, library or "*"))
    if credential.write and libraries is None:
        publish.append(t.deleted(tenant))  # the whole tenant
        subscribe.append(t.removed(tenant))
    if credential.write:
        publish += _bodies(t, tenant, write=True)
        # Setting how a library's documents are cut is a writer's; the ingestor checks it.
        publish.append(t.profile_for(tenant, credential.grant))
    return Permissions(publish=publish, subscribe=subscribe)


def permissions(t: Topology, credentials: Sequence[Credential] = ()) -> dict[str, Permissions]:
    """The permissions of kbus's services and of every tenant credential on one installation."""
    tenants = sorted({c.tenant for c in credentials})
    users = {
        # The setup job, and the admin jobs that publish stored documents again: reembed
        # (chunks, after asking the embedders their model) and reprocess (any tenant's texts).
        "admin": Permissions(
            publish=["$JS.API.>", "$KV.>", t.added("*", "*"), t.chunks_ready, t.embed],
            subscribe=[f"{inbox('admin')}.>"],
        ),
        "ingestor": Permissions(
            publish=[
                *_stream_checks(t),
                *_consumer(t.documents_stream.name, t.ingestor_durable, t.document_added),
                t.chunks_ready,
                t.chunks_generate,
                *(right for tenant in tenants for right in _bodies(t, tenant, write=False)),
                *_kv(t.profiles_bucket),
                t.dead_letter("ingestor", "*", "*"),
                t.document_failed,
            ],
            subscribe=[f"{inbox('ingestor')}.>", *_served(t, "ingestor")],
            allow_responses=True,
        ),
        "generator": Permissions(
            publish=[
                *_stream_checks(t),
                *_consumer(t.chunks_stream.name, t.generator_durable, t.chunks_generate),
                t.chunks_ready,
                *_kv(t.generated_bucket),
                t.dead_letter("generator", "*", "*"),
                t.document_failed,
            ],
            subscribe=[f"{inbox('generator')}.>"],
            allow_responses=True,
        ),
        "embedder": Permissions(
            publish=[
                *_stream_checks(t),
                *_consumer(t.chunks_stream.name, t.embedder_durable, t.chunks_ready),
                t.embeddings_ready,
                *_kv(t.embed_cache_bucket),
                *_kv(t.token_states_bucket),
                t.dead_letter("embedder", "*", "*"),
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
                # ... and the profiles bucket, which only the ingestor writes.
                *_kv_reads(t.profiles_bucket),
                *_reader(f"KV_{t.profiles_bucket}"),
                "$JS.API.STREAM.NAMES",
                t.document_indexed,
                t.document_removed,
                t.document_failed,
                # The dead-letterer: advisories in, the named message read, recorded, removed.
                *_consumer(
                    t.advisories_stream.name, t.advisory_durable, t.max_deliveries_advisories
                ),
                *(f"$JS.API.STREAM.MSG.GET.{s.name}" for s in t.work_streams),
                *(f"$JS.API.STREAM.MSG.DELETE.{s.name}" for s in t.work_streams),
                t.dead_letter("*", "*", "*"),
                t.embed,
                t.rerank,
            ],
            subscribe=[f"{inbox('searcher')}.>", *_served(t, "searcher")],
            allow_responses=True,
        ),
        "reranker": Permissions(
            publish=[*_stream_checks(t), *_kv_reads(t.token_states_bucket)],
            subscribe=[f"{inbox('reranker')}.>", *_served(t, "reranker")],
            allow_responses=True,
        ),
    }
    for credential in credentials:
        users[credential.name] = tenant_permissions(t, credential)
    return users


def server_config(
    t: Topology, passwords: dict[str, str], credentials: Sequence[Credential] = ()
) -> str:
    """The ``authorization`` block of nats-server's configuration."""
    users = []
    for user, perms in permissions(t, credentials).items():
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


def k8s_secret(name: str, values: dict[str, str]) -> str:
    """A Kubernetes Secret holding ``values``."""
    lines = ["apiVersion: v1", "kind: Secret", "metadata:", f"  name: {name}", "type: Opaque"]
    lines += ["stringData:", *(f"  {key}: {json.dumps(value)}" for key, value in values.items())]
    return "\n".join(lines) + "\n"


def credential_file(credential: Credential, password: str, prefix: str) -> dict[str, object]:
    """What the holder of a credential connects with (KbClient, the CLI, the MCP server)."""
    return {
        "user": credential.name,
        "password": password,
        "inbox_prefix": inbox(credential.name),
        "tenant": credential.tenant,
        "libraries": list(credential.libraries) if credential.libraries else None,
        "rights": "write" if credential.write else "read",
        "bus_prefix": prefix,
    }


def generate_passwords(credentials: Sequence[Credential] = ()) -> dict[str, str]:
    names = [*SERVICES, *(c.name for c in credentials)]
    return {name: secrets.token_urlsafe(24) for name in names}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbus_dev nats-auth", description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--prefix", default="", help="bus prefix of the installation")
    parser.add_argument(
        "--credential",
        action="append",
        default=[],
        metavar="NAME=TENANT[:LIB+LIB][:read|write]",
        help="a tenant's credential (repeat); just TENANT: every library, read and write",
    )
    args = parser.parse_args(argv)
    credentials = [Credential.parse(text) for text in args.credential]
    passwords = generate_passwords(credentials)
    topology = Topology(args.prefix)
    args.out.mkdir(parents=True, exist_ok=True)
    written = {
        "auth.conf": server_config(topology, passwords, credentials),
        "nats-users-secret.yaml": k8s_secret(
            "kbus-nats-users", {name: passwords[name] for name in SERVICES}
        ),
    }
    for credential in credentials:
        held = credential_file(credential, passwords[credential.name], args.prefix)
        written[f"credential-{credential.name}.json"] = json.dumps(held, indent=2) + "\n"
        written[f"credential-{credential.name}-secret.yaml"] = k8s_secret(
            f"kbus-credential-{credential.name}", {"credential.json": json.dumps(held)}
        )
    for name, text in written.items():
        path = args.out / name
        path.write_text(text)
        path.chmod(0o600)
    print(f"wrote {', '.join(sorted(written))} to {args.out} (keep them secret)")
    return 0
