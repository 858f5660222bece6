"""What each of kbus's services (and the admin jobs) may do inside kbus's account: only
where its stage needs to."""

from __future__ import annotations

from kbus_contract.catalog import CHANNELS
from kbus_contract.lanes import Lane
from kbus_contract.topology import Topology

from kbus_dev.natsauth.users import Permissions, inbox


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


def _stage(t: Topology, name: str) -> list[str]:
    """A stage's consumers: its durable (fair share off); and for a fair stage, its tenants'
    lanes (kbus_runtime.lanes): made when first needed, with a filter within the stage's own
    subjects, pulled from one message at a time and acked, and the durable removed when fair
    share is on. A lane consumer's name is one token, so the names are not narrowed: a stage
    may pull from any consumer of its stream (the chunks stream's are the generator's and the
    embedder's)."""
    stage = t.stage(name)
    every = t.queued(stage.channel)
    rights = _consumer(stage.stream, stage.durable, every)
    if stage.fair:
        rights += [
            f"$JS.API.CONSUMER.CREATE.{stage.stream}.*.{every}",
            f"$JS.API.CONSUMER.MSG.NEXT.{stage.stream}.*",
            f"$JS.ACK.{stage.stream}.*.>",
            f"$JS.API.CONSUMER.DELETE.{stage.stream}.{stage.durable}",
        ]
        if any(len(t.lane_filters(stage.channel, "*", lane)) > 1 for lane in Lane):
            # A lane of several forms (a tenant-wide deletion's beside a library's) is made
            # with filter_subjects, on the subject that names no filter.
            rights.append(f"$JS.API.CONSUMER.CREATE.{stage.stream}.*")
    return rights


def _reader(stream: str) -> list[str]:
    """Create, delete and flow-control ephemeral ordered (push) consumers on a stream."""
    return [
        f"$JS.API.CONSUMER.CREATE.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}.>",
        f"$JS.API.CONSUMER.DELETE.{stream}.>",
        f"$JS.API.CONSUMER.INFO.{stream}.>",
        f"$JS.FC.{stream}.>",
    ]


def _puller(stream: str) -> list[str]:
    """Create, pull from and delete ephemeral pull consumers (no acks) on a stream."""
    return [
        f"$JS.API.CONSUMER.CREATE.{stream}.>",
        f"$JS.API.CONSUMER.DELETE.{stream}.>",
        f"$JS.API.CONSUMER.INFO.{stream}.>",
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.>",
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


def _withdrawals(t: Topology) -> list[str]:
    """What was deleted or published again since, so that a stage skips its work
    (kbus_runtime.withdrawals): the tombstones and the newest publishes, read."""
    return [*_kv_reads(t.tombstones_bucket), *_kv_reads(t.published_bucket)]


def _bodies_reader(t: Topology) -> list[str]:
    """Read and remove large texts, any tenant's (the ingestor and the syncer read one only
    under the tenant and library of the message that names it)."""
    stream = t.bodies_stream.name
    return [
        f"$JS.API.DIRECT.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}.>",
        f"$JS.API.STREAM.PURGE.{stream}",
    ]


def _stream_checks(t: Topology) -> list[str]:
    """Check the streams exist; read every stream's and stage's figures for /metrics."""
    return [
        "$JS.API.INFO",
        *(f"$JS.API.STREAM.INFO.{s.name}" for s in t.streams),
        *(f"$JS.API.CONSUMER.INFO.{s.stream}.{s.durable}" for s in t.stages),
        # The lanes' consumers of the fair stages (kbus_contract.backlog).
        *(f"$JS.API.CONSUMER.LIST.{s.name}" for s in t.work_streams),
    ]


def _served(t: Topology, receiver: str) -> list[str]:
    """The request subjects a service answers (kbus_contract.catalog) and the discovery subjects
    of its NATS micro services ($SRV.PING/INFO/STATS)."""
    entries = [entry for entry in CHANNELS if entry.receiver == receiver]
    return [
        *(t.every(entry.name) for entry in entries),
        *(
            subject
            for service in sorted({entry.micro for entry in entries})
            for verb in ("PING", "INFO", "STATS")
            for subject in (f"$SRV.{verb}", f"$SRV.{verb}.{service}", f"$SRV.{verb}.{service}.*")
        ),
    ]


def _asks(t: Topology, sender: str) -> list[str]:
    """The requests a service sends to other services' micro services (kbus_contract.catalog's
    senders)."""
    return [t.every(e.name) for e in CHANNELS if sender in e.senders and e.micro]


def _answering(
    t: Topology, user: str, publish: list[str], listens: tuple[str, ...] = ()
) -> Permissions:
    """A service's user: what it publishes, its inbox, the requests it answers, and what
    else it ``listens`` to."""
    return Permissions(
        publish=list(dict.fromkeys([*_stream_checks(t), *publish])),
        subscribe=[f"{inbox(user)}.>", *_served(t, user), *listens],
        allow_responses=True,
    )


def _dead_letters(t: Topology, stage: str) -> list[str]:
    """Where a stage publishes its dead letters: both forms (a restricted document's apart);
    and, past a tenant's budget of kept records, the removal of its oldest
    (kbus_runtime.stage.Stage.record)."""
    return [
        *(t.dead_letter(stage, "*", "*", restricted) for restricted in (False, True)),
        f"$JS.API.STREAM.PURGE.{t.dead_letter_stream.name}",
        f"$JS.API.STREAM.PURGE.{t.receipts_stream.name}",
    ]


def service_permissions(t: Topology) -> dict[str, Permissions]:
    """The permissions of kbus's services in their account."""
    return {
        # The setup job, and the admin jobs that publish stored documents again: reembed
        # (chunks, after asking the embedders their model) and reprocess (any tenant's texts,
        # straight into the stream, as the gate would have stored them).
        "admin": Permissions(
            publish=[
                "$JS.API.>",
                "$KV.>",
                t.document_added,
                t.chunks_ready,
                t.every("kb.embed"),
            ],
            subscribe=[f"{inbox('admin')}.>"],
        ),
        # The gate: what tenants send, checked and stored in the documents stream and the
        # store of large texts (kbus_contract.intake).
        "gateway": _answering(
            t,
            "gateway",
            [
                t.document_added,
                t.document_deleted,
                t.document_synced,
                f"{t.bodies_stream.subjects[0]}",
                # Each document's newest publish, for the stages to skip an older one's work.
                *_kv(t.published_bucket),
                # A dead letter its tenant replayed: read, and removed (kbus_gateway.replays).
                f"$JS.API.STREAM.MSG.GET.{t.dead_letter_stream.name}",
                f"$JS.API.STREAM.MSG.DELETE.{t.dead_letter_stream.name}",
            ],
        ),
        **_pipeline(t),
        "searcher": _answering(
            t,
            "searcher",
            [
                *_searcher(t),
                # A sync's list by claim check: read, and removed once applied.
                *_bodies_reader(t),
                # Query searchers say when they answer searches ...
                t.subject("search.pressure"),
            ],
            # ... and indexers yield to them.
            listens=(t.subject("search.pressure"),),
        ),
        "reranker": _answering(t, "reranker", _kv_reads(t.token_states_bucket)),
    }


def _pipeline(t: Topology) -> dict[str, Permissions]:
    """The stages a document passes before the searcher: ingestor, generator, embedder."""
    return {
        "ingestor": _answering(
            t,
            "ingestor",
            [
                *_stage(t, "ingestor"),
                *_withdrawals(t),
                t.chunks_ready,
                t.chunks_generate,
                *_bodies_reader(t),
                *_kv(t.profiles_bucket),
                # Whether the chat models a new profile's links need answer.
                *_asks(t, "ingestor"),
                *_dead_letters(t, "ingestor"),
                t.document_failed,
            ],
        ),
        "generator": _answering(
            t,
            "generator",
            [
                *_stage(t, "generator"),
                *_withdrawals(t),
                t.chunks_ready,
                *_kv(t.generated_bucket),
                *_dead_letters(t, "generator"),
                t.document_failed,
            ],
        ),
        "embedder": _answering(
            t,
            "embedder",
            [
                *_stage(t, "embedder"),
                *_withdrawals(t),
                t.embeddings_ready,
                *_kv(t.embed_cache_bucket),
                *_kv(t.token_states_bucket),
                *_dead_letters(t, "embedder"),
                t.document_failed,
            ],
        ),
    }


def _searcher(t: Topology) -> list[str]:
    return [
        *_stage(t, "indexer"),
        *_stage(t, "deleter"),
        *_stage(t, "syncer"),
        *_kv(t.tombstones_bucket),
        *_kv_reads(t.published_bucket),
        *_kv(t.versions_bucket),
        *_kv(t.sync_marks_bucket),
        *_kv(t.sync_lists_bucket),
        # A source's list replaced by a newer one is removed whole (no markers left behind).
        f"$JS.API.STREAM.PURGE.KV_{t.sync_lists_bucket}",
        # Searchers follow the versions, tombstones and sync marks buckets with key-value watches
        # (nats-py finds a bucket's stream by subject).
        *_reader(f"KV_{t.versions_bucket}"),
        *_reader(f"KV_{t.tombstones_bucket}"),
        *_reader(f"KV_{t.sync_marks_bucket}"),
        # ... and the profiles bucket, which only the ingestor writes.
        *_kv_reads(t.profiles_bucket),
        *_reader(f"KV_{t.profiles_bucket}"),
        "$JS.API.STREAM.NAMES",
        t.document_indexed,
        t.document_removed,
        t.document_failed,
        t.document_reconciled,
        # A large document's progress as its parts are stored (sent, not kept).
        t.every("document.progress"),
        # kb.feed reads a tenant's stored receipts and dead letters.
        *_puller(t.receipts_stream.name),
        *_puller(t.dead_letter_stream.name),
        # The dead-letterer: advisories in, the named message read, recorded, removed.
        *_consumer(t.advisories_stream.name, t.advisory_durable, t.max_deliveries_advisories),
        *(f"$JS.API.STREAM.MSG.GET.{s.name}" for s in t.work_streams),
        *(f"$JS.API.STREAM.MSG.DELETE.{s.name}" for s in t.work_streams),
        *_dead_letters(t, "*"),
        t.every("kb.embed"),
        t.every("kb.rerank"),
    ]
