"""The subjects of one kbus installation: every one derived from its channel in
:mod:`kbus_contract.catalog` and the installation's prefix
(:class:`~kbus_contract.topology.Topology` is built on them)."""

from __future__ import annotations

import functools

from kbus_contract.catalog import ACCEPTED, CHANNELS, Channel, Use, channel
from kbus_contract.lanes import Lane, lane_of_form
from kbus_contract.pipeline import DocumentRef
from kbus_contract.tenancy import GRANT_ALL, UNKNOWN, Identity, identity_of, names_tenant

#: Subjects whose reading a topology keeps (the requests of the tenants active lately).
SUBJECTS_KEPT = 4096


class Subjects:
    """Subject names from the installation's prefix."""

    prefix: str
    inbox_prefix: str

    @property
    def pull_inbox(self) -> bytes:
        """The inbox prefix pull consumers fetch on (FastStream wants bytes with a dot)."""
        return f"{self.inbox_prefix}.".encode()

    def _subject(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    # -- subjects: each is declared once, in kbus_contract.catalog ----------------------------
    #
    # A tenant's messages carry it (and their library) as tokens: NATS accounts and
    # permissions can then say which tenant and which libraries a credential reaches, and the
    # services take the tenant from the subject the server let through (Identity), never from
    # the body alone.

    def subject(self, name: str, restricted: bool = False, **tokens: str | None) -> str:
        """The subject of catalog channel ``name`` with these tokens (None: a form without it);
        with ``restricted``, its form for restricted documents (``catalog.RESTRICTED``)."""
        return self._placed(channel(name), channel(name).fill(restricted, **tokens))

    def every(self, name: str) -> str:
        """Every subject of catalog channel ``name``, as one subscription (for what a tenant
        sends, the gate's)."""
        return self._placed(channel(name), channel(name).subject_template)

    def queued(self, name: str) -> str:
        """Every subject of catalog channel ``name`` as its stream holds them, as one
        subscription: what the gate accepted of what tenants send (``accepted.``), the
        channel's own subjects for what the services send."""
        return self._placed(channel(name), channel(name).queued_template)

    def accepted(self, subject: str) -> str:
        """Where the gate stores a tenant's message sent on ``subject`` (its accepted form)."""
        tokens = subject.split(".")
        if self.prefix and tokens[:1] == [self.prefix]:
            return ".".join([self.prefix, ACCEPTED, *tokens[1:]])
        return f"{ACCEPTED}.{subject}"

    def as_sent(self, subject: str) -> str:
        """The subject a tenant sent a stored message on (a subject the gate did not store:
        itself)."""
        tokens = self._unprefixed(subject)
        if tokens[:1] != [ACCEPTED]:
            return subject
        return self._subject(".".join(tokens[1:]))

    def body_subject(self, tenant: str, library: str, name: str) -> str:
        """Where the parts of one large text of a tenant's library wait (kbus_contract.claimcheck):
        the library's share of the store, which only a message of that library reaches."""
        return self._subject(f"{ACCEPTED}.document.body.{tenant}.{library}.{name}")

    def bodies_of(self, tenant: str, library: str | None = None) -> str:
        """Every part a tenant (one of its libraries) holds in the store of large texts."""
        return self._subject(f"{ACCEPTED}.document.body.{tenant}.{library or '*'}.*")

    def forms(self, name: str, **tokens: str) -> list[str]:
        """Each form of catalog channel ``name`` with these tokens (``*`` for the others)."""
        entry = channel(name)
        return [self._placed(entry, entry.fill_form(form, **tokens)) for form in entry.forms]

    def _placed(self, entry: Channel, subject: str) -> str:
        return self._subject(subject) if entry.prefixed else subject

    def added(self, tenant: str, library: str, lane: Lane = Lane.BULK) -> str:
        """Where a document of a tenant's library is published (in a lane of the tenant's)."""
        return self.in_lane("document.added", lane, tenant=tenant, library=library)

    def in_lane(self, name: str, lane: Lane, **tokens: str) -> str:
        """The subject of catalog channel ``name`` in ``lane``, with these tokens (what a
        tenant sends to the gate; for a channel between the services, what its stream holds)."""
        entry = channel(name)
        forms = [f for f in entry.forms if lane_of_form(f) is lane]
        [form] = [f for f in forms if entry.tokens_of(f) == set(tokens)]
        return self._placed(entry, entry.fill_form(form, **tokens))

    def of_document(self, name: str, document: DocumentRef) -> str:
        """Where a document's message between the stages goes on catalog channel ``name``:
        under its tenant, in its lane."""
        return self.in_lane(name, document.lane, tenant=document.tenant)

    def lane_filters(self, name: str, tenant: str, lane: Lane) -> list[str]:
        """What one tenant's ``lane`` of catalog channel ``name`` holds in its stream, as filter
        subjects (one per form: a tenant-wide deletion has a form of its own)."""
        entry = channel(name)
        return [
            self._placed(entry, entry.fill_form(form, tenant=tenant))
            for form in entry.lane_forms(lane)
        ]

    def tenant_lane(self, name: str, subject: str) -> tuple[str, Lane] | None:
        """The tenant and lane of a queued subject of catalog channel ``name`` (None: not of
        it)."""
        matched = channel(name).match_queued(self._unprefixed(subject))
        if matched is None or "tenant" not in matched[1]:
            return None
        return matched[1]["tenant"], lane_of_form(matched[0])

    def deleted(self, tenant: str, library: str | None = None) -> str:
        """Where a deletion in a library (or of a whole tenant, without one) is published."""
        return self.subject("document.deleted", tenant=tenant, library=library)

    def indexed(self, tenant: str, library: str, restricted: bool = False) -> str:
        """Receipt: a document of this library is searchable."""
        return self.subject("document.indexed", restricted, tenant=tenant, library=library)

    def progress(self, tenant: str, library: str, restricted: bool = False) -> str:
        """How far a large document of this library has been indexed."""
        return self.subject("document.progress", restricted, tenant=tenant, library=library)

    def removed(self, tenant: str, library: str | None = None, restricted: bool = False) -> str:
        """Receipt: what a deletion removed."""
        return self.subject("document.removed", restricted, tenant=tenant, library=library)

    def synced(self, tenant: str, library: str) -> str:
        """Where a library's (or one source's) complete list is published."""
        return self.subject("document.synced", tenant=tenant, library=library)

    def reconciled(self, tenant: str, library: str) -> str:
        """Receipt: what a sync did."""
        return self.subject("document.reconciled", True, tenant=tenant, library=library)

    def failed(self, tenant: str, library: str, restricted: bool = False) -> str:
        """Receipt: a document will not be indexed."""
        return self.subject("document.failed", restricted, tenant=tenant, library=library)

    def dead_letter(
        self,
        stage: str,
        tenant: str | None = None,
        library: str | None = None,
        restricted: bool = False,
    ) -> str:
        """A dead letter of a stage, under the tenant and library of its message (``_`` where
        they are not known)."""
        return self.subject(
            "deadletter",
            restricted,
            stage=stage,
            tenant=tenant or UNKNOWN,
            library=library or UNKNOWN,
        )

    def indexed_of(self, tenant: str, library: str | None = None, restricted: bool = False) -> str:
        """The receipts of a tenant's library (all its libraries without one)."""
        return self.subject("document.indexed", restricted, tenant=tenant, library=library or "*")

    def dead_letters_of(
        self, tenant: str, library: str | None = None, restricted: bool = False
    ) -> str:
        """The dead letters of a tenant's library (all its libraries without one), any stage."""
        return self.subject(
            "deadletter", restricted, stage="*", tenant=tenant, library=library or "*"
        )

    def asked(
        self, name: str, tenant: str, grant: str = GRANT_ALL, restricted: bool = False
    ) -> str:
        """A tenant's request subject of catalog channel ``name`` (``kb.search``...), within a
        grant (:func:`grant_token`)."""
        return self.subject(name, restricted, tenant=tenant, grant=grant)

    # -- every tenant's (what streams capture and services subscribe to) -----------------------

    @property
    def document_added(self) -> str:
        """Documents the gate accepted (what the ingestor takes)."""
        return self.queued("document.added")

    @property
    def document_deleted(self) -> str:
        """Deletions the gate accepted."""
        return self.queued("document.deleted")

    @property
    def document_synced(self) -> str:
        """Syncs the gate accepted."""
        return self.queued("document.synced")

    @property
    def document_reconciled(self) -> str:
        return self.every("document.reconciled")

    @property
    def document_removed(self) -> str:
        return self.every("document.removed")

    @property
    def document_indexed(self) -> str:
        return self.every("document.indexed")

    @property
    def document_failed(self) -> str:
        return self.every("document.failed")

    @property
    def dead_letters(self) -> str:
        return self.every("deadletter")

    # -- between the services only -------------------------------------------------------------

    @property
    def chunks_ready(self) -> str:
        return self.every("chunks.ready")

    @property
    def chunks_generate(self) -> str:
        """Chunks waiting for generated matching texts (the generator's input)."""
        return self.every("chunks.generate")

    @property
    def embeddings_ready(self) -> str:
        return self.every("embeddings.ready")

    def names_tenant(self, subject: str) -> bool:
        """Whether ``subject`` (as sent, or as the gate stored it) is of a kind that carries a
        tenant (malformed or not)."""
        return names_tenant(self._as_sent(subject))

    @functools.lru_cache(maxsize=SUBJECTS_KEPT)  # noqa: B019 - a topology lives as its process
    def channel_of(self, subject: str) -> str:
        """The catalog name of a subject of this installation, as sent or as the gate stored it
        ("" for none)."""
        tokens = self._as_sent(subject)
        return next((entry.name for entry in CHANNELS if entry.read(tokens) is not None), "")

    @functools.lru_cache(maxsize=SUBJECTS_KEPT)  # noqa: B019 - a topology lives as its process
    def identity(self, subject: str) -> Identity:
        """The tenant, library and grant a tenant's subject names, as sent or as the gate stored
        it (empty for other subjects). Read once per subject (of the last
        :data:`SUBJECTS_KEPT`): a request service reads every request's."""
        return identity_of(self._as_sent(subject))

    @functools.lru_cache(maxsize=SUBJECTS_KEPT)  # noqa: B019 - a topology lives as its process
    def turn_of(self, subject: str) -> tuple[str, bool]:
        """Whose turn a request takes, and whether a tenant sent it: the tenant its subject
        names (a tenant's own subject, or kbus's asking on a tenant's behalf: ``kb.embed``,
        ``kb.rerank``); "" for a request for no tenant."""
        tokens = self._as_sent(subject)
        for entry in CHANNELS:
            found = entry.read(tokens)
            if found is not None and "tenant" in found:
                tenant = found["tenant"]
                return ("" if tenant == UNKNOWN else tenant), entry.use is not Use.NONE
        return "", False

    def _as_sent(self, subject: str) -> list[str]:
        """The tokens of the subject a tenant sent: a stored subject without the gate's token."""
        tokens = self._unprefixed(subject)
        return tokens[1:] if tokens[:1] == [ACCEPTED] else tokens

    def _unprefixed(self, subject: str) -> list[str]:
        """The subject's tokens after this installation's prefix (none for another's)."""
        tokens = subject.split(".")
        if not self.prefix:
            return tokens
        return tokens[1:] if tokens[:1] == [self.prefix] else []
