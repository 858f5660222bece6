"""Syncs: a library (or one source's part of it) brought in step with its source's list.

A sync at stream sequence S lists every document the source holds now. The documents of that
source indexed from a publish before S and not listed are deleted as a deletion at S would be
(so a publish after the sync still wins, and a late part of an older publish stays out). The
listed documents already searchable at their listed version are unchanged; the others are
waited for (they may still be in the pipeline, or be published just after the list) until
``settle_s``, and those that never arrive are named in the receipt as failed.

Two syncs of a source may even run at once: each deletes only what was published before it,
so the later one's list decides what a document published between them becomes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from faststream.nats.message import NatsMessage
from kbus_contract import (
    DocumentDeleted,
    DocumentFailed,
    LibraryReconciled,
    LibrarySync,
    SyncEntry,
)
from kbus_contract.claimcheck import discard_body, read_body
from kbus_contract.errors import ErrorCode, PermanentError
from kbus_contract.syncing import MAX_LISTED, MAX_NAMED
from kbus_contract.tenancy import require_library
from kbus_runtime.budgets import Resource
from kbus_runtime.redelivery import stream_sequence
from kbus_runtime.stage import Stage
from nats.errors import Error as NatsError
from nats.js.errors import APIError
from pydantic import ValidationError
from weaviate.exceptions import WeaviateBaseError

from kbus_searcher.index.deleting import Deleter
from kbus_searcher.state.records import read_records
from kbus_searcher.state.syncmarks import PART_BYTES, SyncMarks, parts
from kbus_searcher.state.versions import Versions
from kbus_searcher.store import ChunkStore, Scope
from kbus_searcher.store.errors import unavailable

log = logging.getLogger("kbus.searcher")
T = TypeVar("T")

#: Documents read from the store per page, deleted at once, and asked about at once.
PAGE = 1_000
AT_ONCE = 32
#: Seconds between two looks at the listed documents still waited for (it grows to the cap).
POLL_S, POLL_CAP_S = 0.5, 5.0
#: Failure receipts read at one look (the rest at the next).
MAX_FAILURES_READ = 1_000


@dataclass
class Plan:
    """What a sync does, from the list and what was indexed when it started."""

    delete: list[str] = field(default_factory=list)
    unchanged: int = 0
    #: Listed documents not yet searchable at their listed version: id to (version, indexed).
    pending: dict[str, tuple[str, bool]] = field(default_factory=dict)


def plan_sync(listed: dict[str, str], indexed: dict[str, tuple[str, int]], sequence: int) -> Plan:
    """Compare a sync's list with the indexed documents (version and publish sequence)."""
    plan = Plan()
    for document_id, (_, published) in indexed.items():
        if document_id not in listed and published < sequence:
            plan.delete.append(document_id)
    for document_id, version in listed.items():
        current = indexed.get(document_id)
        if current is not None and current[0] == version:
            plan.unchanged += 1
        else:
            plan.pending[document_id] = (version, current is not None)
    return plan


def parse_listing(data: bytes) -> dict[str, str]:
    """A claim-checked list (JSON lines of SyncEntry), refusing a malformed or ambiguous one."""
    listed: dict[str, str] = {}
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = SyncEntry.model_validate_json(line)
        except ValidationError as exc:
            raise PermanentError(
                f"line {number} of the list is not a document id and version: "
                f"{exc.errors()[0]['msg']}",
                code=ErrorCode.BAD_LISTING,
            ) from exc
        _add(listed, entry)
    return listed


def _add(listed: dict[str, str], entry: SyncEntry) -> None:
    known = listed.setdefault(entry.document_id, entry.version)
    if known != entry.version:
        raise PermanentError(
            f"the list names {entry.document_id!r} twice, at versions {known!r} and "
            f"{entry.version!r}",
            code=ErrorCode.BAD_LISTING,
        )
    if len(listed) > MAX_LISTED:
        raise PermanentError(
            f"the list names more than {MAX_LISTED} documents", code=ErrorCode.BAD_LISTING
        )


@dataclass
class Waited:
    """The documents one sync waits for, and those dead-lettered meanwhile."""

    sync: LibrarySync
    #: Listed documents not yet searchable at their listed version: id to (version, indexed).
    pending: dict[str, tuple[str, bool]]
    sequence: int
    #: When the sync was stored: failures from then on are this sync's documents'.
    stored: datetime
    #: The last receipt read, so each look reads only the new ones.
    receipts_after: int = 0
    dead: dict[str, str] = field(default_factory=dict)


@dataclass(eq=False)
class Reconciler:
    """Applies ``document.synced`` messages, one receipt each on ``document.reconciled``."""

    stage: Stage
    store: ChunkStore
    deleter: Deleter
    versions: Versions
    syncs: SyncMarks
    settle_max_s: float = 600.0

    async def handle(self, message: NatsMessage) -> None:
        """Settle one ``document.synced`` message, for the tenant and library of its subject."""
        sequence = stream_sequence(message) or 0
        sent = self.stage.topology.identity(message.raw_message.subject)
        stored = message.raw_message.metadata.timestamp

        async def work(sync: LibrarySync) -> None:
            require_library(sent, sync.tenant, sync.library)
            try:
                await self.reconcile(sync, sequence, stored)
            except PermanentError as exc:
                await self._refused(sync, sequence, exc)
                raise

        await self.stage.settle(message, LibrarySync, work)

    async def reconcile(
        self, sync: LibrarySync, sequence: int, stored: datetime | None = None
    ) -> LibraryReconciled:
        """Apply one sync published at ``sequence`` (``stored`` then), and publish its receipt."""
        listed = await self._listed(sync)
        await self._room_for(sync, listed)
        # Before the store is read: a publish it does not list, written after that read, is
        # then removed by the indexer's check after its write (as a deletion's tombstone is).
        await self.syncs.record(sync.tenant, sync.library, sync.source, sequence, listed)
        plan = plan_sync(listed, await self._indexed(sync), sequence)
        await _gather(plan.delete, lambda i: self._delete(sync, i, sequence))
        waited = Waited(sync, plan.pending, sequence, stored or datetime.now(UTC))
        settled, superseded, unsettled = await self._settle(waited)
        added = sum(1 for i in settled if not plan.pending[i][1])
        receipt = LibraryReconciled(
            tenant=sync.tenant,
            library=sync.library,
            source=sync.source,
            sync_id=sync.sync_id,
            added=added,
            changed=len(settled) - added,
            unchanged=plan.unchanged,
            deleted=len(plan.delete),
            superseded=len(superseded),
            failed=len(unsettled) + len(waited.dead),
            unsettled=tuple(sorted(unsettled)[:MAX_NAMED]),
            dead_lettered=tuple(f"{i}: {why}" for i, why in sorted(waited.dead.items()))[
                :MAX_NAMED
            ],
        )
        await self._send(sync, sequence, receipt)
        await self._discard(sync)
        return receipt

    async def _send(self, sync: LibrarySync, sequence: int, receipt: LibraryReconciled) -> None:
        topology = self.stage.topology
        await self.stage.record(
            receipt,
            topology.reconciled(sync.tenant, sync.library),
            stream=topology.receipts_stream.name,
            msg_id=f"reconciled:{sequence}",
            tenant=sync.tenant,
            budget=Resource.RECEIPTS,
        )

    async def _refused(self, sync: LibrarySync, sequence: int, exc: PermanentError) -> None:
        """The receipt of a sync that will not be applied, saying why (its dead letter follows)."""
        receipt = LibraryReconciled(
            tenant=sync.tenant,
            library=sync.library,
            source=sync.source,
            sync_id=sync.sync_id,
            added=0,
            changed=0,
            unchanged=0,
            deleted=0,
            failed=0,
            refused=str(exc),
        )
        await self._send(sync, sequence, receipt)

    async def _room_for(self, sync: LibrarySync, listed: dict[str, str]) -> None:
        """Refuse a list that would take the tenant's kept lists past its budget (each kept
        message counts as a whole part; the source's own list, which this one replaces, does
        not count)."""
        stage = self.stage
        if stage.budgets is None or stage.usage is None:
            return
        stream = f"KV_{self.syncs.lists_config.bucket}"
        held = await stage.usage.messages(stream, self.syncs.held_by(sync.tenant))
        own = await stage.usage.read(
            stream, self.syncs.held_for(sync.tenant, sync.library, sync.source)
        )
        adding = len(parts(listed)) + 1
        budget = stage.budgets.of(sync.tenant).count(Resource.SYNC_LIST_BYTES)
        if (held - own + adding) * PART_BYTES > budget:
            raise PermanentError(
                f"tenant {sync.tenant!r} keeps {held} parts of its sources' lists; this sync's "
                f"{adding} more would pass its budget ({Resource.SYNC_LIST_BYTES.value}) of "
                f"{budget} bytes: sync "
                "fewer sources, or ask the operator for a larger budget",
                code=ErrorCode.QUOTA_EXCEEDED,
            )

    async def _listed(self, sync: LibrarySync) -> dict[str, str]:
        if sync.documents is not None:
            listed: dict[str, str] = {}
            for entry in sync.documents:
                _add(listed, entry)
            return listed
        assert sync.listing is not None
        js = self.stage.broker.connection.jetstream()
        data = await read_body(js, self.stage.topology, sync.tenant, sync.library, sync.listing)
        return parse_listing(data)

    async def _indexed(self, sync: LibrarySync) -> dict[str, tuple[str, int]]:
        """Every document of the sync's library (and source) in the store: its latest
        version and that version's publish sequence."""
        found: dict[str, tuple[str, int]] = {}
        after: str | None = None
        scope = Scope.whole(sync.tenant, (sync.library,), "a sync compares its list with it")
        view = self.store.view(scope)
        while True:
            try:
                page, after = await view.versions(sync.source, after, PAGE)
            except WeaviateBaseError as exc:
                raise unavailable(exc, "list versions") from exc
            found.update(page)
            if after is None:
                return found

    async def _delete(self, sync: LibrarySync, document_id: str, sequence: int) -> None:
        deletion = DocumentDeleted(
            tenant=sync.tenant, library=sync.library, document_id=document_id
        )
        await self.deleter.delete(deletion, sequence, f"removed:{sequence}:{document_id}")

    async def _settle(self, waited: Waited) -> tuple[set[str], set[str], set[str]]:
        """The pending documents that became searchable at their listed version (or at one
        published after the sync) within ``settle_s``; those a deletion published after the
        sync removed; and the others. One dead-lettered meanwhile is not waited for."""
        sync, pending, sequence = waited.sync, waited.pending, waited.sequence
        waiting = set(pending)
        settled: set[str] = set()
        superseded: set[str] = set()
        settle_s = min(sync.settle_s, self.settle_max_s)
        deadline = time.monotonic() + settle_s
        pause = POLL_S
        while waiting:
            ids = sorted(waiting)
            entries = await _gather(
                ids, lambda i: self.versions.entry(sync.tenant, sync.library, i)
            )
            for document_id, entry in zip(ids, entries, strict=True):
                if entry is not None and (
                    entry[1] == pending[document_id][0] or entry[0] > sequence
                ):
                    settled.add(document_id)
            marks = await self.deleter.tombstones.barriers(
                [(sync.tenant, sync.library, i) for i in ids]
            )
            superseded |= {i for i, mark in zip(ids, marks, strict=True) if mark > sequence}
            waiting -= settled | superseded
            waiting -= await self._dead_lettered(waited, waiting)
            if not waiting or time.monotonic() + pause > deadline:
                break
            await asyncio.sleep(pause)
            pause = min(POLL_CAP_S, pause * 2)
        if waiting:
            log.warning(
                "sync %s/%s at %d: %d listed documents not searchable within %.0f s",
                sync.tenant,
                sync.library,
                sequence,
                len(waiting),
                settle_s,
            )
        return settled - superseded, superseded, waiting

    async def _dead_lettered(self, waited: Waited, waiting: set[str]) -> set[str]:
        """The documents waited for whose ``document.failed`` receipt was stored since the
        sync (kept in ``waited.dead`` with why); none if the receipts cannot be read now."""
        sync, t = waited.sync, self.stage.topology
        subjects = [
            t.subject("document.failed", restricted, tenant=sync.tenant, library=sync.library)
            for restricted in (False, True)
        ]
        try:
            found, _ = await read_records(
                self.stage.broker.connection,
                t.receipts_stream.name,
                subjects,
                MAX_FAILURES_READ,
                after=waited.receipts_after,
                since=None if waited.receipts_after else waited.stored,
            )
        except (APIError, NatsError, TimeoutError) as exc:
            log.warning("the failures of sync %s could not be read: %s", sync.sync_id, exc)
            return set()
        for msg in found:
            waited.receipts_after = msg.metadata.sequence.stream
            with contextlib.suppress(ValidationError):
                failed = DocumentFailed.model_validate_json(msg.data)
                if failed.document_id in waiting:
                    waited.dead[failed.document_id] = f"{failed.code}: {failed.reason}"
        return waiting & set(waited.dead)

    async def _discard(self, sync: LibrarySync) -> None:
        """Remove the claim-checked list once its receipt is out (best effort: the store's
        age limit removes what this misses)."""
        if sync.listing is None:
            return
        js = self.stage.broker.connection.jetstream()
        try:
            await discard_body(js, self.stage.topology, sync.tenant, sync.library, sync.listing)
        except Exception as exc:
            log.warning("could not remove the sync list %s: %s", sync.listing.name, exc)


async def _gather(ids: list[str], ask: Callable[[str], Awaitable[T]]) -> list[T]:
    """``ask`` of every id, ``AT_ONCE`` at a time, in order."""
    results: list[T] = []
    for start in range(0, len(ids), AT_ONCE):
        results += await asyncio.gather(*(ask(i) for i in ids[start : start + AT_ONCE]))
    return results
