"""Every subject kbus sends or answers: the one place each is declared.

A channel says its subject's forms (tokens in braces: ``document.added.{tenant}.{library}``),
what travels on it, what answers it, who sends and who answers it, and what a tenant's
credential may do with it (:class:`Use`). Everything else is derived from it: the names
:class:`~kbus_contract.topology.Topology` hands out, who a subject acts for
(:mod:`kbus_contract.tenancy`), the NATS accounts and permissions of every credential
(``python -m kbus_dev nats-auth``), the AsyncAPI document (``python -m kbus_dev asyncapi``) and
the micro services' endpoints (``kbus_runtime.answering``).
"""

from __future__ import annotations

import kbus_contract as c
from kbus_contract.channels import (
    ACCEPTED,
    GATEWAY,
    RESTRICTED,
    Channel,
    Use,
    is_restricted,
)

__all__ = [
    "ACCEPTED",
    "CHANNELS",
    "CHAT_MODEL_USERS",
    "GATEWAY",
    "RESTRICTED",
    "Channel",
    "Use",
    "channel",
    "is_restricted",
    "tenant_channels",
]

#: The services that prompt a chat model for a library's profile, their micro services and
#: the link each serves.
CHAT_MODEL_USERS = (
    ("generator", "kbus-generate", "generated matching texts"),
    ("searcher", "kbus-search", "query transformers"),
    ("reranker", "kbus-rerank", "prompted reranking"),
)

CHANNELS: tuple[Channel, ...] = (
    Channel(
        "document.added",
        ("document.added.{tenant}.{library}", "document.added.{tenant}.{library}.interactive"),
        c.DocumentAdded,
        c.Accepted,
        description="A document to index: document.added.{tenant}.{library}, or "
        "document.added.{tenant}.{library}.interactive for one a person waits for: it goes "
        "ahead of the tenant's bulk work. The gate answers as JetStream does and stores it "
        "(stream DOCUMENTS).",
        senders=("client",),
        receiver=GATEWAY,
        micro="kbus-gate",
        use=Use.WRITE,
    ),
    Channel(
        "document.deleted",
        ("document.deleted.{tenant}.{library}", "document.deleted.{tenant}"),
        c.DocumentDeleted,
        c.Accepted,
        description="Delete a document or a library (document.deleted.{tenant}.{library}) or a "
        "tenant (document.deleted.{tenant}); the gate stores it (stream DOCUMENTS).",
        senders=("client",),
        receiver=GATEWAY,
        micro="kbus-gate",
        use=Use.WRITE,
    ),
    Channel(
        "document.synced",
        ("document.synced.{tenant}.{library}",),
        c.LibrarySync,
        c.Accepted,
        description="The complete list of a library's documents, or of one source's part of "
        "it: what was indexed before it and is not listed is deleted; one receipt on "
        "document.reconciled says what the sync did; the gate stores it (stream DOCUMENTS).",
        senders=("client",),
        receiver=GATEWAY,
        micro="kbus-gate",
        use=Use.WRITE,
    ),
    Channel(
        "document.body",
        ("document.body.{tenant}.{library}",),
        c.BodyPart,
        c.Accepted,
        description="A part of a large document's text or of a sync's list, before the "
        "message whose claim check names it; the gate stores it in the library's share of the "
        "store of large texts (stream BODIES).",
        senders=("client",),
        receiver=GATEWAY,
        micro="kbus-gate",
        use=Use.WRITE,
    ),
    Channel(
        "chunks.generate",
        ("chunks.generate.{tenant}", "chunks.generate.{tenant}.interactive"),
        c.ChunksReady,
        description="A document's chunks whose library's profile asks for generated matching "
        "texts, from the ingestor to the generator, under the document's tenant and lane "
        "(stream CHUNKS).",
        senders=("ingestor",),
    ),
    Channel(
        "chunks.ready",
        ("chunks.ready.{tenant}", "chunks.ready.{tenant}.interactive"),
        c.ChunksReady,
        description="A document's chunks, from the ingestor or the generator, under the "
        "document's tenant and lane (stream CHUNKS).",
        senders=("ingestor", "generator"),
    ),
    Channel(
        "embeddings.ready",
        ("embeddings.ready.{tenant}", "embeddings.ready.{tenant}.interactive"),
        c.EmbeddingsReady,
        description="A document's chunks with vectors, in parts, under the document's tenant "
        "and lane (stream EMBEDDINGS).",
        senders=("embedder",),
    ),
    Channel(
        "document.indexed",
        ("document.indexed.{tenant}.{library}", "document.indexed.{tenant}.{library}.restricted"),
        c.DocumentIndexed,
        description="Receipt: a document's version is searchable, on "
        "document.indexed.{tenant}.{library}, or with .restricted after it for a document "
        "not everyone may read (stream RECEIPTS).",
        senders=("indexer",),
        use=Use.RECEIVE,
    ),
    Channel(
        "document.progress",
        ("document.progress.{tenant}.{library}", "document.progress.{tenant}.{library}.restricted"),
        c.DocumentProgress,
        description="How far a large document's indexing has come (chunks stored of all), "
        "each time one of its parts is stored, on document.progress.{tenant}.{library} (or with "
        ".restricted after it for a document not everyone may read). Not stored: for whoever "
        "listens at the time.",
        senders=("indexer",),
        use=Use.RECEIVE,
    ),
    Channel(
        "search.pressure",
        ("search.pressure",),
        c.SearchesAnswered,
        description="A query searcher says, at most every tenth of a second while it answers "
        "searches, that it does: the indexers then write in small slices, so a search waits for "
        "one slice at most (not stored; kbus's services only).",
        senders=("searcher",),
    ),
    Channel(
        "document.removed",
        (
            "document.removed.{tenant}.{library}",
            "document.removed.{tenant}",
            "document.removed.{tenant}.{library}.restricted",
        ),
        c.DocumentRemoved,
        description="Receipt: what a deletion removed, on the deletion's own tenant and library "
        "tokens; a document's removal with .restricted after them unless every chunk it "
        "removed was everyone's (stream RECEIPTS).",
        senders=("indexer",),
        use=Use.RECEIVE,
    ),
    Channel(
        "document.reconciled",
        ("document.reconciled.{tenant}.{library}.restricted",),
        c.LibraryReconciled,
        description="Receipt: what a sync did (added, changed, unchanged, deleted, failed), on "
        "document.reconciled.{tenant}.{library}.restricted: it names documents of the source, "
        "so it is for its publisher (stream RECEIPTS).",
        senders=("indexer",),
        use=Use.RECEIVE,
    ),
    Channel(
        "document.failed",
        ("document.failed.{tenant}.{library}", "document.failed.{tenant}.{library}.restricted"),
        c.DocumentFailed,
        description="Receipt: a document will not be indexed, with the stage and reason, on "
        "document.failed.{tenant}.{library} (.restricted after it unless the document is "
        "everyone's) (stream RECEIPTS; the dead letter holds the original).",
        senders=("ingestor", "embedder", "indexer"),
        use=Use.RECEIVE,
    ),
    Channel(
        "deadletter",
        (
            "deadletter.{stage}.{tenant}.{library}",
            "deadletter.{stage}.{tenant}.{library}.restricted",
        ),
        c.DeadLetter,
        description="A message a stage could not process, with why, on "
        "deadletter.{stage}.{tenant}.{library} (_ where not known); .restricted after it "
        "unless the message is of a document everyone may read (stream DEADLETTER).",
        senders=("ingestor", "embedder", "indexer"),
        use=Use.RECEIVE,
    ),
    Channel(
        "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES",
        ("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.{consumer}",),
        c.MaxDeliveriesAdvisory,
        description="The server gave up on a message no delivery settled (stream ADVISORIES); "
        "the searcher's dead-letterer records it as a dead letter and removes it.",
        senders=("nats-server",),
    ),
    Channel(
        "kb.search",
        ("kb.search.{tenant}.{grant}",),
        c.SearchRequest,
        c.SearchReply,
        description="Search: the top k chunks with their scores (request-reply), on "
        "kb.search.{tenant}.{grant}: the grant is _all or the libraries the sender may read, "
        "sorted and joined by +.",
        senders=("client",),
        receiver="searcher",
        micro="kbus-search",
        use=Use.READ,
        repeatable=True,
    ),
    Channel(
        "kb.backlog",
        ("kb.backlog.{tenant}.{grant}",),
        c.BacklogRequest,
        c.BacklogReply,
        description="What of a tenant's own work waits at each stage, lane by lane "
        "(request-reply), on kb.backlog.{tenant}.{grant}: the messages its next one waits "
        "behind; the stages serve it in turn with other tenants' (docs/scaling.md, \"Fair "
        'share").',
        senders=("client",),
        receiver="searcher",
        micro="kbus-search",
        use=Use.READ,
        repeatable=True,
    ),
    Channel(
        "kb.stats",
        ("kb.stats.{tenant}.{grant}", "kb.stats.{tenant}.{grant}.restricted"),
        c.StatsRequest,
        c.StatsReply,
        description="Documents and chunks per library of a tenant, or one library's documents "
        "(request-reply), on kb.stats.{tenant}.{grant}: those everyone and the claimed "
        "principals may read; every document, restricted ones too, only on "
        "kb.stats.{tenant}.{grant}.restricted (a credential that may write, or act for anyone).",
        senders=("client",),
        receiver="searcher",
        micro="kbus-search",
        use=Use.READ,
        repeatable=True,
    ),
    Channel(
        "kb.feed",
        ("kb.feed.{tenant}.{grant}", "kb.feed.{tenant}.{grant}.restricted"),
        c.FeedRequest,
        c.FeedReply,
        description="A tenant's receipts or dead letters as stored, oldest first, from a "
        "sequence or a time (request-reply), on kb.feed.{tenant}.{grant}: only the grant's "
        "libraries', and those of restricted documents only on "
        "kb.feed.{tenant}.{grant}.restricted.",
        senders=("client",),
        receiver="searcher",
        micro="kbus-search",
        use=Use.READ,
        repeatable=True,
    ),
    Channel(
        "kb.versions",
        ("kb.versions.{tenant}.{grant}",),
        c.VersionsRequest,
        c.VersionsReply,
        description="The indexed version of each document of a library (or of one source), "
        "paged by document id (request-reply), on kb.versions.{tenant}.{grant}: what a "
        "publisher compares with its source before a sync; writing credentials only.",
        senders=("client",),
        receiver="searcher",
        micro="kbus-search",
        use=Use.WRITE,
        repeatable=True,
    ),
    Channel(
        "kb.profile",
        ("kb.profile.{tenant}.{grant}",),
        c.ProfileRequest,
        c.ProfileReply,
        description="Read or set a library's profile (its chunker), on "
        "kb.profile.{tenant}.{grant}; a profile that cannot work is refused with the reason.",
        senders=("client",),
        receiver="ingestor",
        micro="kbus-profile",
        use=Use.WRITE,
    ),
    Channel(
        "kb.readprofile",
        ("kb.readprofile.{tenant}.{grant}",),
        c.ProfileRequest,
        c.ProfileReply,
        description="Read a library's profile, on kb.readprofile.{tenant}.{grant}: the subject "
        "a read-only credential holds; a request that sets one is refused.",
        senders=("client",),
        receiver="ingestor",
        micro="kbus-profile",
        use=Use.READ,
        repeatable=True,
    ),
    Channel(
        "kb.embed",
        ("kb.embed.{tenant}",),
        c.EmbedRequest,
        c.EmbedReply,
        description="Vectors for texts, used by the searcher (request-reply), on "
        "kb.embed.{tenant}: the tenant a search is for (_ for kbus's own), whose requests "
        "take their turn with other tenants'.",
        senders=("searcher",),
        receiver="embedder",
        micro="kbus-embed",
        repeatable=True,
    ),
    Channel(
        "kb.rerank",
        ("kb.rerank.{tenant}",),
        c.RerankRequest,
        c.RerankReply,
        description="Scores for candidates, used by the searcher (request-reply), on "
        "kb.rerank.{tenant}: the tenant a search is for, whose requests take their turn with "
        "other tenants'.",
        senders=("searcher",),
        receiver="reranker",
        micro="kbus-rerank",
    ),
    *(
        Channel(
            f"kb.chat.{service}",
            (f"kb.chat.{service}",),
            c.ChatCheck,
            c.ChatState,
            description=f"Whether the {service}'s chat model answers now ({link}): the "
            "ingestor asks before it keeps a profile that needs it.",
            senders=("ingestor",),
            receiver=service,
            micro=micro,
        )
        for service, micro, link in CHAT_MODEL_USERS
    ),
)

_BY_NAME = {entry.name: entry for entry in CHANNELS}


def channel(name: str) -> Channel:
    """The catalog entry of a subject name (without prefix)."""
    return _BY_NAME[name]


def tenant_channels() -> tuple[Channel, ...]:
    """The channels a tenant's credential may use, in catalog order."""
    return tuple(entry for entry in CHANNELS if entry.use is not Use.NONE)
