"""The key-value buckets and object stores of one kbus installation: their names and how
each is kept (:class:`~kbus_contract.topology.Topology` mixes them in)."""

from __future__ import annotations

import hashlib

from nats.js.api import KeyValueConfig

from kbus_contract import storage

#: A profile is a few hundred bytes; the bucket needs no work stream's room.
_PROFILES_MAX_BYTES = 64 * 1024**2
#: How long the newest publish of a document is remembered: longer than any backlog of work
#: it lets the stages skip (past it, the indexer still keeps only the newest: it is a saving,
#: not a rule).
PUBLISHED_KEPT_S = 24 * 3600.0


def scope_key(tenant: str, library: str | None = None, document_id: str | None = None) -> str:
    """The key of a tenant, a library or a document in the buckets kept by document (the
    tombstones, the versions, the newest publishes; document ids are hashed: any text)."""
    key = f"t.{tenant}"
    if library is not None:
        key += f".l.{library}"
    if document_id is not None:
        key += ".d." + hashlib.sha256(document_id.encode()).hexdigest()[:32]
    return key


def covering_keys(tenant: str, library: str, document_id: str) -> tuple[str, str, str]:
    """The keys whose deletions cover a document: its tenant's, its library's and its own."""
    return scope_key(tenant), scope_key(tenant, library), scope_key(tenant, library, document_id)


class Buckets:
    """Bucket names and configurations, from the installation's prefix, copies and sizes."""

    prefix: str
    replicas: int
    stream_max_bytes: int

    def _name(self, name: str) -> str:
        """A stream's or bucket's name: the prefix's, or kbus's by default."""
        stem = f"{self.prefix}_{name}" if self.prefix else f"KBUS_{name}"
        return stem.upper().replace(".", "_").replace("-", "_")

    @property
    def embed_cache_bucket(self) -> str:
        """KV bucket of vectors by model and text hash: unchanged text is never embedded twice."""
        return self._name("embedcache")

    @property
    def generated_bucket(self) -> str:
        """KV bucket of generated matching texts by model, prompt and chunk: never twice."""
        return self._name("generated")

    @property
    def token_states_bucket(self) -> str:
        """KV bucket of each chunk's token states by model and text hash, for re-scoring."""
        return self._name("tokenstates")

    @property
    def profiles_bucket(self) -> str:
        """KV bucket of library profiles: ``{tenant}.{library}`` to the profile's JSON."""
        return self._name("profiles")

    @property
    def tombstones_bucket(self) -> str:
        """KV bucket of deletions: tombstone key to the stream sequence of the delete."""
        return self._name("tombstones")

    @property
    def versions_bucket(self) -> str:
        """KV bucket of each document's searchable version (the newest complete one)."""
        return self._name("versions")

    @property
    def published_bucket(self) -> str:
        """KV bucket of each document's newest publish: its key to the publish's stream
        sequence, written by the gate (what the stages skip: kbus_runtime.withdrawals)."""
        return self._name("published")

    @property
    def sync_marks_bucket(self) -> str:
        """KV bucket of each source's latest sync: its key to the sync's stream sequence."""
        return self._name("syncmarks")

    @property
    def sync_lists_bucket(self) -> str:
        """KV bucket of the latest sync's list of each source, in parts (document ids)."""
        return self._name("synclists")

    def bucket(
        self,
        name: str,
        description: str,
        max_bytes: int | None = None,
        *,
        direct: bool = False,
        max_age_s: float | None = None,
    ) -> KeyValueConfig:
        """One of kbus's key-value buckets (see :func:`kbus_contract.storage.bucket`)."""
        size = max_bytes if max_bytes is not None else self.stream_max_bytes
        return storage.bucket(
            name,
            description,
            replicas=self.replicas,
            max_bytes=size,
            direct=direct,
            max_age_s=max_age_s,
        )

    @property
    def tombstones_kv(self) -> KeyValueConfig:
        return self.bucket(self.tombstones_bucket, "kbus deletions: scope to stream sequence")

    @property
    def published_kv(self) -> KeyValueConfig:
        return self.bucket(
            self.published_bucket,
            "kbus newest publish of each document (a day)",
            direct=True,
            max_age_s=PUBLISHED_KEPT_S,
        )

    @property
    def versions_kv(self) -> KeyValueConfig:
        return self.bucket(self.versions_bucket, "kbus searchable version of each document")

    @property
    def sync_marks_kv(self) -> KeyValueConfig:
        return self.bucket(self.sync_marks_bucket, "kbus latest sync of each source")

    @property
    def sync_lists_kv(self) -> KeyValueConfig:
        return self.bucket(self.sync_lists_bucket, "kbus document ids of each source's sync")

    @property
    def embed_cache_kv(self) -> KeyValueConfig:
        return self.bucket(
            self.embed_cache_bucket, "kbus vectors by sha256(model, text)", direct=True
        )

    @property
    def generated_kv(self) -> KeyValueConfig:
        # Texts, not vectors: a quarter of a stream's size holds millions of chunks' worth.
        return self.bucket(
            self.generated_bucket,
            "kbus generated matching texts by sha256(model, prompt, text)",
            self.stream_max_bytes // 4,
            direct=True,
        )

    @property
    def token_states_kv(self) -> KeyValueConfig:
        return self.bucket(
            self.token_states_bucket, "kbus token states by sha256(model, text)", direct=True
        )

    @property
    def profiles_kv(self) -> KeyValueConfig:
        size = min(self.stream_max_bytes, _PROFILES_MAX_BYTES)
        return self.bucket(self.profiles_bucket, "kbus library profiles", size)

    @property
    def buckets(self) -> tuple[KeyValueConfig, ...]:
        """Every bucket, as the set-up job creates them."""
        return (
            self.tombstones_kv,
            self.published_kv,
            self.versions_kv,
            self.sync_marks_kv,
            self.sync_lists_kv,
            self.embed_cache_kv,
            self.token_states_kv,
            self.profiles_kv,
            self.generated_kv,
        )
