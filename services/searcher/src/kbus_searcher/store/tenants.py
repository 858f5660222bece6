"""Weaviate tenants made in batches: the kbus tenants whose first chunks arrive together (a
crowd of new tenants each publishing at once) are made in one request, not one at a time."""

from __future__ import annotations

import asyncio
from typing import Any

from weaviate.classes.tenants import Tenant
from weaviate.exceptions import WeaviateBaseError


class TenantMaker:
    """Makes one collection's missing tenants: every tenant asked for while a request runs is
    made by the next one, together."""

    def __init__(self, collection: Any) -> None:
        self.collection = collection
        self._waiting: dict[str, asyncio.Future[None]] = {}
        self._running: asyncio.Task[None] | None = None

    async def make(self, tenant: str) -> None:
        """Return once the tenant exists (made now, or found); raise what the store said."""
        future = self._waiting.get(tenant)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._waiting[tenant] = future
            if self._running is None or self._running.done():
                self._running = asyncio.create_task(self._run())
        await asyncio.shield(future)

    async def _run(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, {}
            try:
                await self._make(sorted(batch))
            except WeaviateBaseError as exc:
                for future in batch.values():
                    future.set_exception(exc)
            else:
                for future in batch.values():
                    future.set_result(None)

    async def _make(self, names: list[str]) -> None:
        found = await self.collection.tenants.get_by_names(names)
        missing = [Tenant(name=name) for name in names if name not in found]
        if not missing:
            return
        try:
            await self.collection.tenants.create(missing)
        except WeaviateBaseError:
            # Another searcher may have made some of them meanwhile.
            found = await self.collection.tenants.get_by_names(names)
            if any(name not in found for name in names):
                raise
