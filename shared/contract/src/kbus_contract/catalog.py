"""Every message kbus sends or answers, by subject: the source of its documentation.

The services declare their stream subscriptions with FastStream and serve requests as NATS
micro services (``kbus_runtime.answering``); this catalog says which contract travels on each
subject, which contract a request is answered with, and which micro service answers it. The
AsyncAPI document is built from both (``python -m kbus_dev asyncapi``), and the micro services'
endpoint metadata from the request-reply entries.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel

import kbus_contract as c
from kbus_contract.topology import Topology


@dataclass(frozen=True)
class Channel:
    """One subject, what travels on it, and for requests, what answers."""

    name: str
    subject: Callable[[Topology], str]
    payload: type[BaseModel]
    reply: type[BaseModel] | None = None
    description: str = ""
    senders: tuple[str, ...] = ()
    #: For a request served as a NATS micro service: the service answering it (its replicas'
    #: queue group) and the micro service's name.
    receiver: str = ""
    micro: str = ""

    @property
    def subject_template(self) -> str:
        """The subject without a bus prefix."""
        return self.subject(Topology())

    def request_schema(self) -> str:
        return json.dumps(self.payload.model_json_schema(mode="validation"), sort_keys=True)

    def reply_schema(self) -> str:
        if self.reply is None:
            return ""
        return json.dumps(
            {
                "oneOf": [
                    self.reply.model_json_schema(mode="serialization"),
                    c.ErrorReply.model_json_schema(mode="serialization"),
                ]
            },
            sort_keys=True,
        )


CHANNELS: tuple[Channel, ...] = (
    Channel(
        "document.added",
        lambda t: t.document_added,
        c.DocumentAdded,
        description="A document to index: document.added.{tenant}.{library} (JetStream, stream "
        "DOCUMENTS).",
        senders=("client",),
    ),
    Channel(
        "document.deleted",
        lambda t: t.document_deleted,
        c.DocumentDeleted,
        description="Delete a document or a library (document.deleted.{tenant}.{library}) or a "
        "tenant (document.deleted.{tenant}) (stream DOCUMENTS).",
        senders=("client",),
    ),
    Channel(
        "chunks.generate",
        lambda t: t.chunks_generate,
        c.ChunksReady,
        description="A document's chunks whose library's profile asks for generated matching "
        "texts, from the ingestor to the generator (stream CHUNKS).",
        senders=("ingestor",),
    ),
    Channel(
        "chunks.ready",
        lambda t: t.chunks_ready,
        c.ChunksReady,
        description="A document's chunks, from the ingestor or the generator (stream CHUNKS).",
        senders=("ingestor", "generator"),
    ),
    Channel(
        "embeddings.ready",
        lambda t: t.embeddings_ready,
        c.EmbeddingsReady,
        description="A document's chunks with vectors, in parts (stream EMBEDDINGS).",
        senders=("embedder",),
    ),
    Channel(
        "document.indexed",
        lambda t: t.document_indexed,
        c.DocumentIndexed,
        description="Receipt: a document's version is searchable, on "
        "document.indexed.{tenant}.{library} (stream RECEIPTS).",
        senders=("indexer",),
    ),
    Channel(
        "document.removed",
        lambda t: t.document_removed,
        c.DocumentRemoved,
        description="Receipt: what a deletion removed, on the deletion's own tenant and library "
        "tokens (stream RECEIPTS).",
        senders=("indexer",),
    ),
    Channel(
        "document.failed",
        lambda t: t.document_failed,
        c.DocumentFailed,
        description="Receipt: a document will not be indexed, with the stage and reason, on "
        "document.failed.{tenant}.{library} (stream RECEIPTS; the dead letter holds the "
        "original).",
        senders=("ingestor", "embedder", "indexer"),
    ),
    Channel(
        "deadletter.{stage}.{tenant}.{library}",
        lambda t: t.dead_letters,
        c.DeadLetter,
        description="A message a stage could not process, with why, under its tenant and "
        "library (_ where not known) (stream DEADLETTER).",
        senders=("ingestor", "embedder", "indexer"),
    ),
    Channel(
        "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>",
        lambda t: t.max_deliveries_advisories,
        c.MaxDeliveriesAdvisory,
        description="The server gave up on a message no delivery settled (stream ADVISORIES); "
        "the searcher's dead-letterer records it as a dead letter and removes it.",
        senders=("nats-server",),
    ),
    Channel(
        "kb.search",
        lambda t: t.search,
        c.SearchRequest,
        c.SearchReply,
        description="Search: the top k chunks with their scores (request-reply), on "
        "kb.search.{tenant}.{grant}: the grant is _all or the libraries the sender may read, "
        "sorted and joined by +.",
        senders=("client",),
        receiver="searcher",
        micro="kbus-search",
    ),
    Channel(
        "kb.stats",
        lambda t: t.stats,
        c.StatsRequest,
        c.StatsReply,
        description="Documents and chunks per library of a tenant (request-reply), on "
        "kb.stats.{tenant}.{grant}.",
        senders=("client",),
        receiver="searcher",
        micro="kbus-search",
    ),
    Channel(
        "kb.profile",
        lambda t: t.profile,
        c.ProfileRequest,
        c.ProfileReply,
        description="Read or set a library's profile (its chunker), on "
        "kb.profile.{tenant}.{grant}; a profile that cannot work is refused with the reason.",
        senders=("client",),
        receiver="ingestor",
        micro="kbus-profile",
    ),
    Channel(
        "kb.readprofile",
        lambda t: t.readprofile,
        c.ProfileRequest,
        c.ProfileReply,
        description="Read a library's profile, on kb.readprofile.{tenant}.{grant}: the subject "
        "a read-only credential holds; a request that sets one is refused.",
        senders=("client",),
        receiver="ingestor",
        micro="kbus-profile",
    ),
    Channel(
        "kb.embed",
        lambda t: t.embed,
        c.EmbedRequest,
        c.EmbedReply,
        description="Vectors for texts, used by the searcher (request-reply).",
        senders=("searcher",),
        receiver="embedder",
        micro="kbus-embed",
    ),
    Channel(
        "kb.rerank",
        lambda t: t.rerank,
        c.RerankRequest,
        c.RerankReply,
        description="Scores for candidates, used by the searcher (request-reply).",
        senders=("searcher",),
        receiver="reranker",
        micro="kbus-rerank",
    ),
)


def channel(name: str) -> Channel:
    """The catalog entry of a subject name (without prefix)."""
    for entry in CHANNELS:
        if entry.name == name:
            return entry
    raise KeyError(name)
