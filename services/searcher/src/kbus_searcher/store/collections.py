"""The index's collections: one per embedding model, the alias searches read, and tenants.

``KBUS_WEAVIATE_COLLECTION`` names an alias. Each model's vectors live in a collection of their
own (``<alias>_<model>``); the first collection written becomes the alias's target, and a
re-embedding moves the alias in one step (:mod:`kbus_searcher.jobs.reembed`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kbus_runtime.store import StoreClient
from weaviate.collections.classes.tenants import TenantActivityStatus
from weaviate.exceptions import WeaviateBaseError

from kbus_searcher.store.schema import (
    Replication,
    add_missing_properties,
    apply_flat_search_cutoff,
    create_collection,
    slug,
)
from kbus_searcher.store.tenants import TenantMaker

log = logging.getLogger("kbus.searcher")

#: How long a searcher keeps the alias's target before looking again (a switch shows within it).
ACTIVE_TTL_S = 1.0
#: Seconds between two looks for idle tenants (at most).
IDLE_CHECK_S = 60.0


class Collections:
    """The collections of one index, their tenants, and handles to them."""

    def __init__(
        self,
        client: StoreClient,
        alias: str,
        *,
        flat_search_cutoff: int,
        replication: Replication | None = None,
    ) -> None:
        self.client = client
        self.replication = replication or Replication()
        #: The alias searches read through.
        self.alias = alias
        self.flat_search_cutoff = flat_search_cutoff
        self._known: set[str] = set()
        self._tenants: set[tuple[str, str]] = set()
        self._handles: dict[tuple[str, str, bool, int], Any] = {}
        self._makers: dict[tuple[str, int], TenantMaker] = {}
        #: When this searcher last read or wrote each (collection, tenant).
        self._used: dict[tuple[str, str], float] = {}
        #: When the index's tenants were last listed for active ones (a whole list: rarely).
        self._swept = -float("inf")
        self._active: tuple[float, str | None] = (-ACTIVE_TTL_S, None)

    def physical(self, model: str) -> str:
        """The collection that holds the vectors of one model."""
        return f"{self.alias}_{slug(model)}"

    async def ensure(self) -> None:
        """Start-up: apply this searcher's settings to the index's existing collections."""
        for name in await self.all_physical():
            collection = self.client.collections.use(name)
            await apply_flat_search_cutoff(collection, self.flat_search_cutoff)
            await add_missing_properties(collection)
            self._known.add(name)

    async def _create(self, name: str) -> None:
        if name in self._known:
            return
        if not await self.client.collections.exists(name):
            await create_collection(self.client, name, self.flat_search_cutoff, self.replication)
        self._known.add(name)

    async def all_physical(self) -> list[str]:
        """Every collection of this index (one per model that has written to it)."""
        names = await self.client.collections.list_all(simple=True)
        return sorted(n for n in names if n.startswith(f"{self.alias}_"))

    async def drop(self) -> None:
        """Delete the whole index: its alias and the collection of every model."""
        names = await self.all_physical()
        await self.client.alias.delete(alias_name=self.alias)
        for name in names:
            await self.client.collections.delete(name)
        self._known.clear()
        self._tenants.clear()
        self._handles.clear()
        self._active = (-ACTIVE_TTL_S, None)

    async def active(self) -> str | None:
        """The collection searches read (None until anything is indexed)."""
        checked, name = self._active
        if time.monotonic() - checked < ACTIVE_TTL_S:
            return name
        alias = await self.client.alias.get(alias_name=self.alias)
        name = alias.collection if alias is not None else None
        self._active = (time.monotonic(), name)
        return name

    async def refresh_active(self) -> bool:
        """Read the alias again now; returns whether searches should read another collection."""
        before = self._active[1]
        self._active = (-ACTIVE_TTL_S, None)
        return await self.active() != before

    async def switch_to(self, name: str) -> None:
        """Make searches read ``name``: one atomic move of the alias."""
        if await self.client.alias.get(alias_name=self.alias) is None:
            await self.client.alias.create(alias_name=self.alias, target_collection=name)
        else:
            await self.client.alias.update(alias_name=self.alias, new_target_collection=name)
        self._active = (-ACTIVE_TTL_S, None)
        log.info("searches now read %s", name)

    async def writable(self, model: str) -> str:
        """The collection of a model's vectors, created on first use; the first is active."""
        name = self.physical(model)
        await self._create(name)
        if await self.active() is None:
            try:
                await self.client.alias.create(alias_name=self.alias, target_collection=name)
            except WeaviateBaseError:
                if await self.client.alias.get(alias_name=self.alias) is None:
                    raise
            self._active = (-ACTIVE_TTL_S, None)
        return name

    def use(self, name: str, tenant: str, *, write: bool = False) -> Any:
        """A handle to one tenant of a collection, at the consistency level of writes or of
        reads (kept: building one per call showed in profiles, and a handle holds no server
        state)."""
        collections = self.client.collections  # of the node in use: a handle is a node's
        key = (name, tenant, write, id(collections))
        self._used[name, tenant] = time.monotonic()
        handle = self._handles.get(key)
        if handle is None:
            level = self.replication.level(write)
            handle = collections.use(name).with_tenant(tenant).with_consistency_level(level)
            self._handles[key] = handle
        return handle

    async def ensure_tenant(self, tenant: str, name: str) -> None:
        """Create the Weaviate tenant of a kbus tenant in a collection on first use (with the
        other tenants asked for meanwhile, in one request)."""
        if (name, tenant) in self._tenants:
            return
        key = (name, id(self.client.collections))  # a handle is a node's
        maker = self._makers.get(key)
        if maker is None:
            maker = self._makers[key] = TenantMaker(self.client.collections.use(name))
        await maker.make(tenant)
        self._tenants.add((name, tenant))

    async def tenant_exists(self, tenant: str, name: str | None = None) -> bool:
        """Whether any chunk was ever written for this tenant (in the active collection)."""
        name = name or await self.active()
        if name is None:
            return False
        if (name, tenant) in self._tenants:
            return True
        if name not in self._known and not await self.client.collections.exists(name):
            return False
        exists = bool(await self.client.collections.use(name).tenants.exists(tenant))
        if exists:
            self._tenants.add((name, tenant))
        return exists

    async def tenants(self, name: str) -> list[str]:
        """The tenants of a collection."""
        return sorted(await self.client.collections.use(name).tenants.get())

    async def deactivate_idle(self, idle_s: float) -> list[str]:
        """The tenants made inactive now, one request per collection: those this searcher used
        and then left for ``idle_s``, and those active that it has not used for ``idle_s``
        since it saw them so (made active by another process, or before a restart)."""
        if time.monotonic() - self._swept >= idle_s:
            await self._note_active()
        cutoff = time.monotonic() - idle_s
        idle: dict[str, list[str]] = {}
        for (name, tenant), used in list(self._used.items()):
            if used <= cutoff:
                idle.setdefault(name, []).append(tenant)
        rested: list[str] = []
        for name, tenants in idle.items():
            try:
                await self.client.collections.use(name).tenants.deactivate(tenants)
            except WeaviateBaseError as exc:
                log.warning("could not make %d idle tenants inactive: %s", len(tenants), exc)
                continue
            for tenant in tenants:
                if self._used.get((name, tenant), 0.0) <= cutoff:
                    self._forget(name, tenant)
            rested += tenants
        if rested:
            log.info("%d idle tenants made inactive", len(rested))
        return rested

    async def _note_active(self) -> None:
        """Count every active tenant of the index as used now, unless this searcher used it
        already: each is then made inactive once idle here, whoever made it active. It reads
        every tenant's status, so it runs once per ``idle_s`` (at the first check after a
        start, then each time a tenant could have become idle), not at every check."""
        now = self._swept = time.monotonic()
        for name in await self.all_physical():
            try:
                tenants = await self.client.collections.use(name).tenants.get()
            except WeaviateBaseError as exc:
                log.warning("could not list the tenants of %s: %s", name, exc)
                continue
            for tenant, found in tenants.items():
                if found.activity_status == TenantActivityStatus.ACTIVE:
                    self._used.setdefault((name, tenant), now)

    async def remove_tenant(self, tenant: str) -> list[str]:
        """Remove a kbus tenant's Weaviate tenant from every collection of this index (its
        shard, and so its files, go); the collections it was in."""
        removed = []
        for name in await self.all_physical():
            collection = self.client.collections.use(name)
            if await collection.tenants.exists(tenant):
                await collection.tenants.remove([tenant])
                removed.append(name)
            self._forget(name, tenant)
        return removed

    def _forget(self, name: str, tenant: str) -> None:
        """Hold nothing of an idle tenant: what this process keeps follows active tenants, not
        every tenant it ever served (a handle and the tenant's existence are read again on its
        next use)."""
        self._used.pop((name, tenant), None)
        self._tenants.discard((name, tenant))
        for key in [k for k in self._handles if k[:2] == (name, tenant)]:
            del self._handles[key]

    def held(self) -> int:
        """The (collection, tenant) pairs this process holds anything of."""
        return len(self._used.keys() | self._tenants | {k[:2] for k in self._handles})
