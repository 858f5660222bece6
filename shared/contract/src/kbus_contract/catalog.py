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

import json
import re
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel

import kbus_contract as c
from kbus_contract.lanes import Lane, lane_of_form

_TOKEN = re.compile(r"^\{(\w+)\}$")

#: The token before a tenant's subject once the gate accepted its message: streams hold what
#: tenants send under it (``accepted.document.added.{tenant}.{library}``), and only kbus's
#: services reach it (kbus_contract.intake).
ACCEPTED = "accepted"
#: The service that answers what a tenant sends into the streams.
GATEWAY = "gateway"

#: The last token of a form that carries what names restricted documents (those whose
#: ``access`` is not everyone): their receipts, their dead letters, the feed that reads them
#: back. Only a credential that may write the library, or act for anyone, reaches such a form.
RESTRICTED = "restricted"


def is_restricted(form: str) -> bool:
    """Whether a form is one of those for restricted documents. Forms only: a subject's last
    token may be a library named "restricted" (match the subject to its form first)."""
    return form.rsplit(".", 1)[-1] == RESTRICTED


class Use(StrEnum):
    """What a tenant's credential may do with a subject (always its own tenant's forms)."""

    #: Nothing: between kbus's services only.
    NONE = "none"
    #: A writing credential publishes or asks on it, within its libraries.
    WRITE = "write"
    #: Every credential asks on it, within its grant.
    READ = "read"
    #: Every credential listens on it, within its libraries.
    RECEIVE = "receive"


@dataclass(frozen=True)
class Channel:
    """One subject, what travels on it, and for requests, what answers."""

    name: str
    #: The subject's forms, most specific first; ``{tenant}``, ``{library}``, ``{grant}`` and
    #: ``{stage}`` are tokens filled per message.
    forms: tuple[str, ...]
    payload: type[BaseModel]
    reply: type[BaseModel] | None = None
    description: str = ""
    senders: tuple[str, ...] = ()
    #: For a request served as a NATS micro service: the service answering it (its replicas'
    #: queue group) and the micro service's name.
    receiver: str = ""
    micro: str = ""
    use: Use = Use.NONE

    @property
    def subject_template(self) -> str:
        """Every subject of the channel as one subscription (without a bus prefix): each token
        a ``*`` for a request whose forms are all one length, everything after the fixed part
        (``>``) for the rest."""
        first = self.forms[0].split(".")
        if self.reply is not None and len({len(f.split(".")) for f in self.forms}) == 1:
            return ".".join("*" if _TOKEN.match(t) else t for t in first)
        fixed: list[str] = []
        for token in first:
            if _TOKEN.match(token):
                return ".".join([*fixed, ">"])
            fixed.append(token)
        return self.forms[0]

    @property
    def tokens(self) -> frozenset[str]:
        """The names of the tokens its forms carry."""
        return frozenset(
            m.group(1) for form in self.forms for t in form.split(".") if (m := _TOKEN.match(t))
        )

    @property
    def gated(self) -> bool:
        """Whether tenants send it to the gate, which stores it under :data:`ACCEPTED`."""
        return self.receiver == GATEWAY

    @property
    def queued_forms(self) -> tuple[str, ...]:
        """The forms as a stream holds them: the gate's accepted forms of what tenants send,
        the channel's own for what the services send."""
        return tuple(f"{ACCEPTED}.{form}" for form in self.forms) if self.gated else self.forms

    @property
    def queued_template(self) -> str:
        """Every subject of the channel as its stream holds them, as one subscription."""
        if not self.gated:
            return self.subject_template
        return f"{ACCEPTED}.{self.kind}.>"

    @property
    def prefixed(self) -> bool:
        """Whether a bus prefix applies (the server's own ``$`` subjects have none)."""
        return not self.forms[0].startswith("$")

    def fill(self, restricted: bool = False, **tokens: str | None) -> str:
        """The subject of the first form whose every token is given (``None``: not given),
        among the forms for restricted documents or among the others."""
        given = {name: value for name, value in tokens.items() if value is not None}
        for form in self.forms:
            if is_restricted(form) != restricted:
                continue
            names = [m.group(1) for t in form.split(".") if (m := _TOKEN.match(t))]
            if set(names) <= set(given):
                return form.format(**given)
        raise ValueError(f"{self.name}: no form takes {sorted(given)}")

    @staticmethod
    def tokens_of(form: str) -> set[str]:
        """The names of the tokens of one form."""
        return {m.group(1) for t in form.split(".") if (m := _TOKEN.match(t))}

    @staticmethod
    def fill_form(form: str, **tokens: str) -> str:
        """One form with these tokens, ``*`` for the others."""
        return ".".join(
            tokens.get(m.group(1), "*") if (m := _TOKEN.match(t)) else t for t in form.split(".")
        )

    def read(self, tokens: list[str]) -> dict[str, str] | None:
        """The tokens a subject (without prefix) fills in one of the forms, or None."""
        matched = self.match(tokens)
        return None if matched is None else matched[1]

    def match(self, tokens: list[str]) -> tuple[str, dict[str, str]] | None:
        """The form a subject (without prefix) has, with the tokens it fills, or None."""
        for form in self.forms:
            parts = form.split(".")
            if len(parts) != len(tokens):
                continue
            found: dict[str, str] = {}
            for part, token in zip(parts, tokens, strict=True):
                if m := _TOKEN.match(part):
                    found[m.group(1)] = token
                elif part != token:
                    break
            else:
                return form, found
        return None

    def lane_forms(self, lane: Lane) -> tuple[str, ...]:
        """The queued forms of a lane (:mod:`kbus_contract.lanes`)."""
        return tuple(form for form in self.queued_forms if lane_of_form(form) is lane)

    def match_queued(self, tokens: list[str]) -> tuple[str, dict[str, str]] | None:
        """The queued form a subject (without prefix) has, with the tokens it fills, or None."""
        if self.gated:
            if tokens[:1] != [ACCEPTED]:
                return None
            matched = self.match(tokens[1:])
            return None if matched is None else (f"{ACCEPTED}.{matched[0]}", matched[1])
        return self.match(tokens)

    @property
    def kind(self) -> str:
        """The fixed tokens that start every form (``document.added``)."""
        fixed = []
        for token in self.forms[0].split("."):
            if _TOKEN.match(token):
                break
            fixed.append(token)
        return ".".join(fixed)

    def request_schema(self) -> str:
        return json.dumps(self.payload.model_json_schema(mode="validation"), sort_keys=True)

    def reply_schema(self) -> str:
        if self.reply is None:
            return ""
        return json.dumps(
            {
                "oneOf": [
                    self.reply.model_json_schema(mode="serialization"),
                    (c.Refused if self.gated else c.ErrorReply).model_json_schema(
                        mode="serialization"
                    ),
                ]
            },
            sort_keys=True,
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
    ),
    Channel(
        "kb.stats",
        ("kb.stats.{tenant}.{grant}",),
        c.StatsRequest,
        c.StatsReply,
        description="Documents and chunks per library of a tenant (request-reply), on "
        "kb.stats.{tenant}.{grant}.",
        senders=("client",),
        receiver="searcher",
        micro="kbus-search",
        use=Use.READ,
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
)

_BY_NAME = {entry.name: entry for entry in CHANNELS}


def channel(name: str) -> Channel:
    """The catalog entry of a subject name (without prefix)."""
    return _BY_NAME[name]


def tenant_channels() -> tuple[Channel, ...]:
    """The channels a tenant's credential may use, in catalog order."""
    return tuple(entry for entry in CHANNELS if entry.use is not Use.NONE)
