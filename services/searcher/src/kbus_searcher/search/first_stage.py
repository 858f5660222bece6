"""The first stage: a search's candidates from the store (over-fetched), only those of each
document's searchable version, and only vectors of the query's model."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kbus_contract import SearchRequest
from kbus_contract.errors import ErrorCode, PermanentError, TransientError
from nats.errors import Error as NatsError
from weaviate.exceptions import WeaviateBaseError

from kbus_searcher.search.runs import SearchRun
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.state.versions import Versions
from kbus_searcher.store import Candidate, ChunkStore, DocumentKey, Query, StoreView
from kbus_searcher.store.errors import failure, within
from kbus_searcher.store.queries import MAX_RESULT_WINDOW


def _document_key(candidate: Candidate) -> DocumentKey:
    return str(candidate.properties["library"]), str(candidate.properties["document_id"])


def _other_models(candidates: Sequence[Candidate], model: str) -> list[str]:
    if not model:
        return []  # keyword search: no vectors compared
    return sorted({str(c.properties.get("model")) for c in candidates} - {model})


def _refuse_other_models(candidates: Sequence[Candidate], model: str) -> None:
    """A query embedded by one model must not be compared with vectors of another."""
    others = _other_models(candidates, model)
    if others:
        raise PermanentError(
            f"the index holds vectors made by {', '.join(others)}, but this searcher embeds "
            f"queries with {model}: re-embed the library with {model}, or search with a "
            "searcher configured for the index's model (keyword search still works)",
            code=ErrorCode.MODEL_MISMATCH,
        )


@dataclass(eq=False)
class FirstStage:
    """Candidates for a search, within its view of the store."""

    store: ChunkStore
    versions: Versions
    settings: SearcherSettings
    #: Records a stage's time from its start (``perf_counter``); returns milliseconds.
    observe: Callable[[str, float], float]

    async def candidates(
        self,
        req: SearchRequest,
        run: SearchRun,
        vector: list[float] | None,
        view: StoreView,
        waits_s: float,
    ) -> list[Candidate]:
        """Candidates whose vectors the query's model made; anything else is refused.

        A mismatch may mean the index was switched to another model a moment ago: the alias is
        read again and, if it moved, the search runs once more on the new collection.
        """
        query = Query(
            libraries=req.libraries,
            text=run.query,
            vector=vector,
            search_type=req.search_type,
            alpha=run.alpha,
            limit=self._fetch_size(run.k, req.group_by_document),
            filters=dict(req.filters),
            exclude_documents=req.exclude_documents,
        )
        try:
            candidates = await self._candidates(query, req.tenant, run, view, waits_s)
        except PermanentError as exc:
            # A query vector whose length does not fit the collection.
            if (
                exc.code != ErrorCode.MODEL_MISMATCH
                or not await self.store.collections.refresh_active()
            ):
                raise
        else:
            if not _other_models(candidates, run.model):
                return candidates
            if not await self.store.collections.refresh_active():
                _refuse_other_models(candidates, run.model)
                return candidates
        candidates = await self._candidates(query, req.tenant, run, view, waits_s)
        _refuse_other_models(candidates, run.model)
        return candidates

    async def _candidates(
        self, query: Query, tenant: str, run: SearchRun, view: StoreView, waits_s: float
    ) -> list[Candidate]:
        t0 = time.perf_counter()
        try:
            found = await within(view.search(query), waits_s)
            return await self._searchable(tenant, found)
        except WeaviateBaseError as exc:
            raise failure(exc, "search") from exc
        except NatsError as exc:
            raise TransientError(f"the versions bucket: {exc}", code=ErrorCode.BUS_ERROR) from exc
        finally:
            run.timings["search_ms"] = self.observe("search", t0)

    async def _searchable(self, tenant: str, candidates: list[Candidate]) -> list[Candidate]:
        """Only chunks of each document's searchable version (never half of a replacement)."""
        seen: dict[DocumentKey, set[str]] = {}
        for c in candidates:
            seen.setdefault(_document_key(c), set()).add(str(c.properties["version"]))
        versions = await self.versions.searchable(tenant, seen)
        return [
            c
            for c in candidates
            if versions.get(_document_key(c), c.properties["version"]) == c.properties["version"]
        ]

    def _fetch_size(self, k: int, by_document: bool) -> int:
        # A document has several chunks: grouping needs more candidates for k documents.
        factor = self.settings.overfetch_factor * (2 if by_document else 1)
        # The same candidates with a context or without: fusion normalises over them, so the
        # results do not move; a context fills its budget from those beyond k.
        return min(MAX_RESULT_WINDOW, max(self.settings.overfetch_min, factor * k))
