"""Each source's latest sync, remembered so that a late publish it did not list stays out.

A document published before a sync of its source, still in the pipeline when the sync is
applied, and not on the sync's list, must not be indexed when it arrives: the source no longer
holds it. So a sync records its stream sequence under its source's key (the marks bucket,
followed into memory like the tombstones) and its list of document ids (the lists bucket, in
parts, read on demand and cached). The indexer checks a publish against the marks of its
library and of its source before it writes, and again, from the buckets, after.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from kbus_contract.buckets import scope_key
from kbus_runtime.declaring import open_bucket
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from kbus_searcher.state.buckets import FollowedBucket

#: The mark of a sync of a whole library (a source name never starts with ``_``).
WHOLE_LIBRARY = "_library"
#: Bytes of one part of a list (a bucket's value must fit in one message).
PART_BYTES = 256 * 1024
#: Lists kept in memory.
CACHED_LISTS = 16


def mark_key(tenant: str, library: str, source: str | None) -> str:
    """The key of a source's (or a whole library's) sync."""
    return f"{scope_key(tenant, library)}.s.{source or WHOLE_LIBRARY}"


#: A publish as a sync checks it: tenant, library, source ("" for none), document id, sequence.
Publish = tuple[str, str, str, str, int]


def _keys(tenant: str, library: str, source: str) -> tuple[str, ...]:
    """The marks that cover a publish: its library's whole-library sync and its source's."""
    whole = mark_key(tenant, library, None)
    return (whole, mark_key(tenant, library, source)) if source else (whole,)


def parts(ids: Iterable[str]) -> list[bytes]:
    """Sorted ids, a line each, cut into parts of at most ``PART_BYTES`` at line ends."""
    cut: list[bytes] = []
    current = b""
    for document_id in sorted(ids):
        line = document_id.encode() + b"\n"
        if current and len(current) + len(line) > PART_BYTES:
            cut.append(current)
            current = b""
        current += line
    return [*cut, current]


class SyncMarks(FollowedBucket[int]):
    """The marks bucket (followed), and the lists bucket beside it."""

    def __init__(self, marks: KeyValueConfig, lists: KeyValueConfig) -> None:
        super().__init__(marks, int)
        self.lists_config = lists
        self._lists: KeyValue | None = None
        self._js: JetStreamContext | None = None
        self._cache: OrderedDict[tuple[str, int], frozenset[str]] = OrderedDict()

    async def open(self, js: JetStreamContext, *, create: bool = True) -> None:
        """Open both buckets, creating them if allowed."""
        await super().open(js, create=create)
        self._lists = await open_bucket(js, self.lists_config, create=create)
        self._js = js

    @property
    def lists(self) -> KeyValue:
        if self._lists is None:
            raise RuntimeError(f"bucket {self.lists_config.bucket} is not open")
        return self._lists

    async def record(
        self, tenant: str, library: str, source: str | None, sequence: int, ids: Iterable[str]
    ) -> None:
        """Remember a sync and its list (never over a later one): the list first, then the
        mark that points to it; the previous list is removed."""
        key = mark_key(tenant, library, source)
        cut = parts(ids)
        for number, part in enumerate(cut):
            await self.lists.put(f"{key}.{sequence}.{number}", part)
        await self.lists.put(f"{key}.{sequence}", str(len(cut)).encode())
        while True:  # conditional on the revision read: syncs of a source may run at once
            try:
                entry = await self.kv.get(key)
            except KeyNotFoundError:
                entry = None
            before = int(entry.value or b"0") if entry is not None else 0
            if before == sequence:
                return  # this sync again (a redelivery): its list is the one kept
            if before > sequence:
                await self._forget(key, sequence)  # a later sync's list is the one kept
                return
            try:
                if entry is None:
                    await self.kv.create(key, str(sequence).encode())
                else:
                    await self.kv.update(key, str(sequence).encode(), last=entry.revision)
                break
            except KeyWrongLastSequenceError:
                continue
        if before:
            await self._forget(key, before)

    async def unlisted(self, publishes: Sequence[Publish], *, fresh: bool) -> list[bool]:
        """For each publish (tenant, library, source, document id, sequence): whether a sync of
        its library or its source, published after it, did not list it. Each source's mark is
        read once.

        Args:
            fresh: Read the marks bucket; otherwise the in-memory copy answers when following
                (it may miss a sync of a moment ago: a later fresh check catches it).
        """
        keyed = [_keys(tenant, library, source) for tenant, library, source, _, _ in publishes]
        keys = list(dict.fromkeys(key for keys in keyed for key in keys))
        copy = not fresh and self.following
        if copy:
            marks = {key: self.copied(key) or 0 for key in keys}
        else:
            marks = dict(
                zip(keys, await asyncio.gather(*(self._mark(k) for k in keys)), strict=True)
            )
        found = []
        for (_, _, _, document_id, sequence), keys_of in zip(publishes, keyed, strict=True):
            later = [key for key in keys_of if marks[key] > sequence]
            found.append(
                any([not await self._names(key, marks[key], document_id, copy) for key in later])
            )
        return found

    async def _names(self, key: str, mark: int, document_id: str, copy: bool) -> bool:
        """Whether the sync at ``mark`` listed the document (a list a later sync replaced
        meanwhile counts as listing it when read from the copy: the fresh check decides)."""
        try:
            return document_id in await self._listed(key, mark)
        except KeyNotFoundError:
            if copy:
                return True
            return document_id in await self._listed(key, await self._mark(key))

    async def _mark(self, key: str) -> int:
        try:
            return int((await self.kv.get(key)).value or b"0")
        except KeyNotFoundError:
            return 0

    async def _listed(self, key: str, sequence: int) -> frozenset[str]:
        cached = self._cache.get((key, sequence))
        if cached is not None:
            self._cache.move_to_end((key, sequence))
            return cached
        count = int((await self.lists.get(f"{key}.{sequence}")).value or b"0")
        got = await asyncio.gather(*(self.lists.get(f"{key}.{sequence}.{n}") for n in range(count)))
        listed = frozenset(
            line for entry in got for line in (entry.value or b"").decode().splitlines() if line
        )
        self._cache[(key, sequence)] = listed
        while len(self._cache) > CACHED_LISTS:
            self._cache.popitem(last=False)
        return listed

    async def _forget(self, key: str, sequence: int) -> None:
        """Remove a list whole (a key-value delete would leave a marker per part behind)."""
        bucket = self.lists_config.bucket
        assert self._js is not None
        with contextlib.suppress(Exception):
            for subject in (f"$KV.{bucket}.{key}.{sequence}.>", f"$KV.{bucket}.{key}.{sequence}"):
                await self._js.purge_stream(f"KV_{bucket}", subject=subject)

    def held_by(self, tenant: str) -> str:
        """The subjects of every list a tenant's syncs keep (what its budget bounds)."""
        return f"$KV.{self.lists_config.bucket}.{scope_key(tenant)}.>"

    def held_for(self, tenant: str, library: str, source: str | None) -> str:
        """The subjects of the list one source's sync keeps."""
        return f"$KV.{self.lists_config.bucket}.{mark_key(tenant, library, source)}.>"
