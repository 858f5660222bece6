"""Documents on the bus: what publishers send, the receipts they get back, dead letters."""

from __future__ import annotations

import json
import re
import string
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    field_validator,
    model_validator,
)

from kbus_contract.base import Contract, Metadata
from kbus_contract.formats import ContentType
from kbus_contract.identifiers import (
    EVERYONE,
    DocumentId,
    LibraryId,
    Principal,
    SourceName,
    TenantId,
    content_version,
)

MAX_METADATA_KEYS = 256
#: The most chunks a publisher may supply with one document.
MAX_SUPPLIED_CHUNKS = 10_000
#: What separates supplied chunks in the document's text.
CHUNK_SEPARATOR = "\n\n"
#: The most matching texts one chunk may have (each is one more object to embed and index).
MAX_MATCHING_TEXTS = 8
#: The longest matching text: a question or a description, not a second chunk.
MAX_MATCHING_CHARS = 2_000
MatchingText = Annotated[str, Field(min_length=1, max_length=MAX_MATCHING_CHARS)]
MAX_METADATA_BYTES = 16 * 1024
#: The most principals one document's ``access`` names.
MAX_ACCESS = 256


def _count_keys(value: JsonValue) -> int:
    """Keys in a JSON value, nested objects and lists included."""
    if isinstance(value, dict):
        return len(value) + sum(_count_keys(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count_keys(v) for v in value)
    return 0


_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_ -]{0,127}$")


def template_fields(template: str) -> list[str]:
    """The fields a template names, refusing anything but plain names (no attribute or index
    lookups, no conversions: a template is data, never code)."""
    fields = []
    for _, name, spec, conversion in string.Formatter().parse(template):
        if name is None:
            continue
        if not _FIELD.match(name) or spec or conversion:
            raise ValueError(f"template field {{{name}}} is not a plain field name")
        fields.append(name)
    return fields


class RecordTemplate(Contract):
    """How each record of a CSV or JSON document becomes a chunk: its text, its heading and its
    own metadata (a custom data schema). Fields are named ``{field}``."""

    text: str = Field(min_length=1, max_length=4_096, description="The record's chunk text.")
    title: str = Field(
        default="", max_length=1_024, description="The record's heading (its chunk's path)."
    )
    metadata: tuple[str, ...] = Field(
        default=(), max_length=64, description="Fields copied into the chunk's metadata."
    )

    @field_validator("text", "title")
    @classmethod
    def _plain_fields(cls, value: str) -> str:
        template_fields(value)
        return value


class BodyRef(Contract):
    """Where a document's text waits when the document is too large for one message.

    The claim check: the text is in the store of large texts, in the share of the message's
    tenant and library (``kbus_contract.claimcheck``), and the message carries this reference
    instead. The ingestor reads it, checks it, and removes it once the document is processed.
    """

    name: str = Field(pattern=r"^[0-9a-f]{64}$", description="The body's name (64 hex digits).")
    size: int = Field(ge=0, description="Bytes of the UTF-8 text.")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class DocumentAdded(Contract):
    """A document to index, published on ``document.added`` by any service.

    The text travels in ``text``, or, for a document larger than the bus's message limit, in
    the object store with ``body`` saying where (``text`` is then empty).
    """

    tenant: TenantId
    library: LibraryId
    document_id: DocumentId
    title: str = Field(max_length=1_000)
    text: str
    source_uri: str = Field(default="", max_length=4_096)
    content_type: ContentType = ContentType.PLAIN
    metadata: Metadata = Field(default_factory=dict)
    version: str | None = Field(
        default=None,
        max_length=128,
        description="The publisher's version of this document; derived from its content if absent.",
    )
    body: BodyRef | None = Field(
        default=None,
        description="The claim check of a large or binary document's bytes (else absent).",
    )
    url: str | None = Field(
        default=None,
        max_length=4_096,
        pattern=r"^https?://",
        description="A web page the ingestor fetches (then text and body are empty).",
    )
    template: RecordTemplate | None = Field(
        default=None, description="How each record becomes a chunk (CSV and JSON only)."
    )
    chunks: tuple[str, ...] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SUPPLIED_CHUNKS,
        description="The publisher's own chunks, in order: each is indexed as it is and the "
        "library's chunker is not used. text is then their concatenation with a blank line "
        "between (left empty, it is filled in).",
    )
    source: SourceName | None = Field(
        default=None,
        description="The source that owns this document within its library: a sync of that "
        "source (document.synced) removes it when the source no longer lists it.",
    )
    access: tuple[Principal, ...] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_ACCESS,
        description="Who may read this document: users and groups as the source names them. A "
        "search returns its chunks only to a caller acting for one of them; absent, everyone "
        "who may read the library may read it.",
    )
    recut_of: int | None = Field(
        default=None,
        ge=1,
        description="The stored publish (its stream sequence) whose text this one cuts again "
        "(python -m kbus_searcher.jobs.reprocess): it then ranks as that publish, so any later "
        "publish or deletion of the document wins over it.",
    )
    matching: tuple[tuple[MatchingText, ...], ...] | None = Field(
        default=None,
        max_length=MAX_SUPPLIED_CHUNKS,
        description="With chunks: for each chunk, in order, texts matched besides its own "
        f"(questions it answers, a product description; at most {MAX_MATCHING_TEXTS}). Each "
        "gets its own vector and keyword scope; a hit on any returns the chunk once.",
    )

    @model_validator(mode="before")
    @classmethod
    def _text_of_chunks(cls, data: object) -> object:
        if isinstance(data, dict) and data.get("chunks") and not data.get("text"):
            return {**data, "text": CHUNK_SEPARATOR.join(data["chunks"])}
        return data

    @model_validator(mode="after")
    def _supplied_chunks(self) -> DocumentAdded:
        if self.chunks is None:
            return self
        if self.content_type not in (ContentType.PLAIN, ContentType.MARKDOWN):
            raise ValueError("supplied chunks come with text/plain or text/markdown only")
        blank = [i for i, chunk in enumerate(self.chunks) if not chunk.strip()]
        if blank:
            raise ValueError(f"supplied chunk {blank[0]} is empty or whitespace only")
        if self.text != CHUNK_SEPARATOR.join(self.chunks):
            raise ValueError("with supplied chunks, text is their concatenation (or empty)")
        return self

    @model_validator(mode="after")
    def _matching_per_chunk(self) -> DocumentAdded:
        if self.matching is None:
            return self
        if self.chunks is None or len(self.matching) != len(self.chunks):
            raise ValueError("matching texts come with supplied chunks, one tuple per chunk")
        for i, texts in enumerate(self.matching):
            if len(texts) > MAX_MATCHING_TEXTS:
                raise ValueError(
                    f"chunk {i} has {len(texts)} matching texts; the limit is {MAX_MATCHING_TEXTS}"
                )
            if any(not t.strip() for t in texts):
                raise ValueError(f"a matching text of chunk {i} is empty or whitespace only")
        return self

    @model_validator(mode="after")
    def _one_source(self) -> DocumentAdded:
        sources = (self.body is not None) + (self.url is not None)
        if sources > 1:
            raise ValueError("a document has one of text, body or url")
        if sources and self.text:
            raise ValueError("text must be empty when body or url gives the document")
        if not sources and self.content_type.binary:
            raise ValueError(f"{self.content_type.value} travels by claim check (body)")
        if not sources and not self.text.strip():
            raise ValueError("text is empty or whitespace only")
        if self.content_type.records != (self.template is not None):
            raise ValueError("CSV and JSON records need a template; other formats take none")
        return self

    @field_validator("metadata")
    @classmethod
    def _metadata_bounded(cls, value: Metadata) -> Metadata:
        keys = _count_keys(value)
        if keys > MAX_METADATA_KEYS:
            raise ValueError(f"metadata has {keys} keys; the limit is {MAX_METADATA_KEYS}")
        size = len(json.dumps(value))
        if size > MAX_METADATA_BYTES:
            raise ValueError(f"metadata is {size} bytes as JSON; the limit is {MAX_METADATA_BYTES}")
        return value

    def _content(self) -> str:
        if self.body is not None:
            return f"sha256:{self.body.sha256}"
        if self.url is not None:
            return f"url:{self.url}"
        return self.text

    def _described(self) -> tuple[str, ...]:
        described: tuple[str, ...] = (
            self.source_uri,
            self.content_type.value,
            json.dumps(self.metadata, sort_keys=True),
        )
        described += (self.template.model_dump_json(),) if self.template else ()
        # Who owns and who reads a document is indexed with it (vectors come from the cache).
        described += (f"source:{self.source}",) if self.source else ()
        described += (json.dumps(sorted(set(self.access))),) if self.access else ()
        # The same text cut elsewhere, or matched by other texts, is another version.
        described += (json.dumps([len(c) for c in self.chunks]),) if self.chunks else ()
        return described + ((json.dumps(self.matching),) if self.matching else ())

    def effective_version(self) -> str:
        """The publisher's version, or one derived from everything that is indexed."""
        return self.version or content_version(self.title, self._content(), *self._described())

    def readers(self) -> tuple[str, ...]:
        """What its chunks store as ``access``: its principals, or everyone."""
        return tuple(sorted(set(self.access))) if self.access else (EVERYONE,)

    def message_id(self) -> str:
        """The ``Nats-Msg-Id`` of this publish: tenant, library, id and a hash of the content.

        JetStream drops a second publish with the same id inside the stream's duplicate window,
        so an identical re-send is not processed twice; a changed document has another id.
        """
        digest = content_version(
            self.effective_version(), self.title, self._content(), *self._described()
        )
        return f"{self.tenant}/{self.library}/{self.document_id}/{digest}"


class DocumentDeleted(Contract):
    """Remove a document (``document_id`` set), a whole library, or a whole tenant.

    Published on ``document.deleted``. Applies to everything published before it; a document
    published after it is indexed again.
    """

    tenant: TenantId
    library: LibraryId | None = None
    document_id: DocumentId | None = None

    @field_validator("document_id")
    @classmethod
    def _document_needs_library(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("library") is None:
            raise ValueError("a document_id needs its library")
        return value


class DocumentIndexed(Contract):
    """Receipt: the document's current version is searchable (``document.indexed``)."""

    tenant: TenantId
    library: LibraryId
    document_id: DocumentId
    version: str
    chunk_count: int
    model: str


class DocumentProgress(Contract):
    """How far a large document's indexing has come (``document.progress``): sent, not
    stored, each time one of its parts is stored, for whoever listens now."""

    tenant: TenantId
    library: LibraryId
    document_id: DocumentId
    version: str
    #: Chunks of this version stored so far, and in all.
    indexed: int
    total: int


class DocumentRemoved(Contract):
    """Receipt: what a :class:`DocumentDeleted` removed (``document.removed``)."""

    tenant: TenantId
    library: LibraryId | None
    document_id: DocumentId | None
    chunks_deleted: int


#: Bytes of the original payload a dead letter keeps (``DeadLetter.original_size`` tells the rest).
ORIGINAL_LIMIT = 64 * 1024


class DeadLetter(Contract):
    """A message a stage could not process, with the reason (``deadletter.<stage>``)."""

    stage: str
    reason: str
    code: str
    subject: str
    stream_sequence: int | None = None
    deliveries: int | None = None
    tenant: str | None = None
    library: str | None = None
    document_id: str | None = None
    original: str = Field(
        description="The original payload (truncated), for inspection and replay."
    )
    original_size: int


class DocumentFailed(Contract):
    """Receipt: a document will not be indexed (``document.failed``); its dead letter has more."""

    tenant: str
    library: str
    document_id: str
    stage: str
    code: str
    reason: str


class MaxDeliveriesAdvisory(BaseModel):
    """The server's ``io.nats.jetstream.advisory.v1.max_deliver`` event (the fields we use)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    stream: str
    consumer: str
    stream_seq: int
    deliveries: int
