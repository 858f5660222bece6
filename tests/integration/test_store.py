"""The chunk collection on a real Weaviate: writes, scoping, versions, per-object errors."""

from __future__ import annotations

import kbus_searcher.store.writes as writes_module
import numpy as np
import pytest
from kbus_contract import DocumentDeleted, EmbeddedChunk, EmbeddingsReady, SearchType
from kbus_contract.errors import PermanentError
from kbus_runtime.settings import StoreSettings
from kbus_runtime.store import weaviate_client
from kbus_searcher.store import ChunkStore, Query, Scope
from weaviate import WeaviateAsyncClient

from tests.helpers import DIM, ready, unit_vector, upsert


async def _search(
    store: ChunkStore,
    tenant: str,
    libraries: tuple[str, ...],
    query: str,
    search_type: SearchType = SearchType.KEYWORD,
    **filters: object,
) -> list[str]:
    found = await store.view(Scope.of_caller(tenant, None, ("*",))).search(
        Query(
            libraries=libraries,
            text=query,
            vector=list(unit_vector(0)),
            search_type=search_type,
            alpha=0.5,
            limit=20,
            filters=filters,  # type: ignore[arg-type]
        )
    )
    return [c.properties["document_id"] for c in found]


async def test_tenants_and_libraries_are_walls(store: ChunkStore) -> None:
    await upsert(store.writes, ready("t1", "lib-a", "a1", "v1", ["zebra crossing"]))
    await upsert(store.writes, ready("t1", "lib-b", "b1", "v1", ["zebra stripes"]))
    await upsert(store.writes, ready("t2", "lib-a", "x1", "v1", ["zebra herd"]))
    assert await _search(store, "t1", ("lib-a",), "zebra") == ["a1"]
    assert sorted(await _search(store, "t1", ("lib-a", "lib-b"), "zebra")) == ["a1", "b1"]
    assert await _search(store, "t2", ("lib-a",), "zebra") == ["x1"]
    for kind in SearchType:
        assert set(await _search(store, "t1", ("lib-b",), "zebra", kind)) == {"b1"}


async def test_hybrid_candidates_carry_every_score(store: ChunkStore) -> None:
    await upsert(store.writes, ready("t1", "lib", "d", "v1", ["quartz watch repair", "other text"]))
    [top, *_] = await store.view(Scope.of_caller("t1", None, ("*",))).search(
        Query(
            libraries=("lib",),
            text="quartz",
            vector=list(unit_vector(0)),
            search_type=SearchType.HYBRID,
            alpha=0.5,
            limit=5,
        )
    )
    assert top.keyword is not None
    assert top.keyword > 0
    assert top.vector == pytest.approx(1.0, abs=1e-4)  # its own vector
    assert top.fused == pytest.approx(1.0, abs=1e-4)
    # Its document's vector is the mean of the document's two chunk vectors.
    mean = np.asarray(unit_vector(0)) + np.asarray(unit_vector(1))
    expected = float(np.asarray(unit_vector(0)) @ mean / np.linalg.norm(mean))
    assert top.document == pytest.approx(expected, abs=1e-4)


async def test_a_redelivery_overwrites_and_a_new_version_replaces(store: ChunkStore) -> None:
    first = ready("t1", "lib", "doc", "v1", ["one", "two", "three"])
    await upsert(store.writes, first)
    await upsert(store.writes, first)
    assert len(await _search(store, "t1", ("lib",), "one two three")) == 3
    second = ready("t1", "lib", "doc", "v2", ["uno"], sequence=2)
    await upsert(store.writes, second)
    assert await store.writes.count_stored(second) == 1
    assert await store.writes.delete_superseded([second]) == 3
    found = await store.view(Scope.of_caller("t1", None, ("*",))).search(
        Query(
            libraries=("lib",),
            text="one two three uno",
            vector=None,
            search_type=SearchType.KEYWORD,
            alpha=0.5,
            limit=20,
        )
    )
    assert [(c.properties["version"], c.properties["text"]) for c in found] == [("v2", "uno")]


async def test_a_text_cut_again_replaces_the_publish_it_was_cut_from_and_no_other(
    store: ChunkStore,
) -> None:
    """A re-cut shares the sequence of the publish it was cut from; of two at one sequence,
    the later profile revision's is the newer."""
    original = ready("t1", "lib", "doc", "v1", ["one", "two", "three"], sequence=5)
    recut = ready("t1", "lib", "doc", "v1+profile3", ["one two", "three"], sequence=5)
    older_recut = ready("t1", "lib", "doc", "v1+profile2", ["one two three"], sequence=5)
    for publish in (original, recut, older_recut):
        await upsert(store.writes, publish)
    assert await store.writes.delete_superseded([older_recut]) == 3  # the original's chunks
    assert await store.writes.delete_superseded([recut]) == 1  # the older re-cut's
    assert await store.writes.delete_superseded([original]) == 0  # never a newer one
    assert await store.writes.count_stored(recut) == 2


async def test_metadata_filters(store: ChunkStore) -> None:
    await upsert(
        store.writes, ready("t1", "lib", "en", "v1", ["apple pie"], metadata={"lang": "en"})
    )
    await upsert(
        store.writes,
        ready("t1", "lib", "de", "v1", ["apple strudel"], metadata={"lang": "de", "year": 2024}),
    )
    assert await _search(store, "t1", ("lib",), "apple", lang="de") == ["de"]
    assert await _search(store, "t1", ("lib",), "apple", year=2024) == ["de"]
    assert sorted(await _search(store, "t1", ("lib",), "apple", lang=("de", "en"))) == ["de", "en"]


async def test_per_object_errors_are_raised_not_swallowed(store: ChunkStore) -> None:
    await upsert(store.writes, ready("t1", "lib", "good", "v1", ["fine"]))
    with pytest.raises(PermanentError, match="1 of 1 chunks were not stored"):
        await upsert(store.writes, ready("t1", "lib", "wrong-dim", "v1", ["bad"], dim=DIM + 4))
    # One bad object among good ones: the batch reports it without raising; we must not.
    mixed = ready("t1", "lib", "mixed", "v1", ["a", "b", "c"])
    bad_chunk = mixed.chunks[1].model_copy(update={"vector": (0.5,) * (DIM + 1)})
    mixed = mixed.model_copy(update={"chunks": (mixed.chunks[0], bad_chunk, mixed.chunks[2])})
    with pytest.raises(PermanentError, match="1 of 3 chunks were not stored"):
        await upsert(store.writes, mixed)


async def test_a_shared_write_fails_only_the_document_with_a_refused_chunk(
    store: ChunkStore,
) -> None:
    # The first vector stored fixes the index's dimension (a batch's objects go in concurrently).
    await upsert(store.writes, ready("t1", "lib", "good", "v1", ["fine"]))
    mixed = ready("t1", "lib", "mixed", "v1", ["a", "b"])
    bad_chunk = mixed.chunks[1].model_copy(update={"vector": (0.5,) * (DIM + 1)})
    mixed = mixed.model_copy(update={"chunks": (mixed.chunks[0], bad_chunk)})
    batch = [
        ready("t1", "lib", "one", "v1", ["first"]),
        mixed,
        ready("t1", "lib", "two", "v1", ["x"]),
    ]
    first, refused, last = await store.writes.write(batch)
    assert first is None
    assert last is None
    assert isinstance(refused, PermanentError)
    assert "1 of 2 chunks were not stored" in refused.reason
    assert await store.writes.count_stored(batch[0]) == 1
    assert await store.writes.count_stored(batch[2]) == 1


async def test_one_query_finds_the_later_publishes_of_several_documents(
    store: ChunkStore,
) -> None:
    await upsert(store.writes, ready("t1", "lib", "a", "v5", ["a five"], sequence=5))
    await upsert(store.writes, ready("t1", "lib", "b", "v3", ["b three"], sequence=3))
    asked = [
        ready("t1", "lib", "a", "v4", ["a four"], sequence=4),
        ready("t1", "lib", "a", "v6", ["a six"], sequence=6),
        ready("t1", "lib", "b", "v3", ["b three"], sequence=3),
        ready("t1", "lib", "c", "v1", ["c one"], sequence=1),
    ]
    assert await store.writes.newest_sequences(asked) == {("lib", "a"): 5}


async def test_a_deletion_larger_than_one_delete_request_removes_everything(
    store: ChunkStore,
) -> None:
    # Weaviate deletes at most QUERY_MAXIMUM_RESULTS (10,000 by default) objects per request.
    docs = [
        ready("t1", "big", f"d{i}", "v1", [f"d{i} chunk {j}" for j in range(25)])
        for i in range(404)
    ]
    for begin in range(0, len(docs), 40):
        assert not any(await store.writes.write(docs[begin : begin + 40]))
    removed = await store.writes.delete_scope(DocumentDeleted(tenant="t1", library="big"), 10)
    assert removed == 404 * 25
    assert await store.view(Scope.of_caller("t1", None, ("*",))).library_stats() == []


async def test_unknown_tenant(store: ChunkStore) -> None:
    assert not await store.collections.tenant_exists("never-written")


async def _cutoff(client: WeaviateAsyncClient, name: str) -> int:
    vectors = (await client.collections.use(name).config.get()).vector_config
    assert vectors is not None
    index = vectors["chunk"].vector_index_config
    assert hasattr(index, "flat_search_cutoff"), index  # an HNSW index
    return int(index.flat_search_cutoff)


async def test_collections_take_the_flat_search_cutoff(store_settings: StoreSettings) -> None:
    from weaviate.classes.config import Configure

    client = weaviate_client(store_settings)
    await client.connect()
    old = f"{store_settings.collection}Old"
    try:
        new = ChunkStore.create(client, store_settings.collection, flat_search_cutoff=1_234)
        await upsert(new.writes, ready("t1", "lib", "d", "v1", ["text"]))
        assert await _cutoff(client, new.collections.physical("test")) == 1_234
        # A model's collection made with Weaviate's default is brought to the setting at start.
        await client.collections.create(
            f"{old}_test",
            vector_config=Configure.Vectors.self_provided(name="chunk"),
            multi_tenancy_config=Configure.multi_tenancy(enabled=True),
        )
        assert await _cutoff(client, f"{old}_test") == 40_000
        await ChunkStore.create(client, old, flat_search_cutoff=2_000).collections.ensure()
        assert await _cutoff(client, f"{old}_test") == 2_000
    finally:
        await client.collections.delete([f"{old}_test", new.collections.physical("test")])
        await client.close()


async def test_a_scope_above_the_cutoff_is_searched_through_the_graph_and_stays_walled(
    store_settings: StoreSettings,
) -> None:
    client = weaviate_client(store_settings)
    await client.connect()
    store = ChunkStore.create(client, store_settings.collection, flat_search_cutoff=1)
    try:
        for i in range(12):
            seed = 0 if i == 4 else 100 + i  # d4 (lib-1) holds the query's own vector
            await upsert(
                store.writes, ready("t1", f"lib-{i % 3}", f"d{i}", "v1", ["zebra"], seed=seed)
            )
        for kind in (SearchType.VECTOR, SearchType.HYBRID):
            found = await _search(store, "t1", ("lib-1",), "zebra", kind)
            assert sorted(found) == ["d1", "d10", "d4", "d7"]
        assert (await _search(store, "t1", ("lib-1",), "zebra", SearchType.VECTOR))[0] == "d4"
    finally:
        await store.collections.drop()
        await client.close()


@pytest.mark.parametrize("limit", [writes_module.STORED_LIMIT, 2])
async def test_several_documents_lose_exactly_their_superseded_chunks(
    store: ChunkStore, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    # With a limit of 2 the stored chunks are too many to read at once: the per-document and
    # filter-based paths must give the same answers.
    monkeypatch.setattr(writes_module, "STORED_LIMIT", limit)
    for stored in (
        ready("t1", "lib", "a", "v1", ["a one x", "a one y"], sequence=1),
        ready("t1", "lib", "a", "v2", ["a two"], sequence=2),
        ready("t1", "lib", "b", "v1", ["b one"], sequence=1),
        ready("t1", "lib", "b", "v9", ["b nine"], sequence=9),  # later than b's publish below
        ready("t1", "lib", "c", "v4", ["c four, republished"], sequence=4),  # same version
        ready("t1", "other", "a", "v0", ["another library's a"], sequence=1),
    ):
        await upsert(store.writes, stored)
    published = [
        ready("t1", "lib", "a", "v3", ["a three"], sequence=3),
        ready("t1", "lib", "b", "v5", ["b five"], sequence=5),
        ready("t1", "lib", "c", "v4", ["c four, republished"], sequence=6),
    ]
    assert await store.writes.newest_sequences(published) == {("lib", "b"): 9}
    assert not any(await store.writes.write(published))
    assert (
        await store.writes.delete_superseded(published) == 4
    )  # a's v1 (two chunks) and v2, b's v1
    assert await store.writes.delete_superseded(published) == 0
    left = sorted(
        [
            (c["library"], c["document_id"], c["version"], c["sequence"])
            async for c in store.writes.read_chunks(store.collections.physical("test"), "t1")
        ]
    )
    assert left == [
        ("lib", "a", "v3", 3),
        ("lib", "b", "v5", 5),
        ("lib", "b", "v9", 9),
        ("lib", "c", "v4", 6),  # the same chunk id: overwritten, not deleted
        ("other", "a", "v0", 1),
    ]


def _with_matching(
    message: EmbeddingsReady, position: int, texts: tuple[str, ...], seed: int
) -> EmbeddingsReady:
    """``message`` with matching texts for one chunk (text ``i`` has the vector of seed+i)."""
    chunks = list(message.chunks)
    vectors = tuple(unit_vector(seed + i) for i in range(len(texts)))
    chunks[position] = EmbeddedChunk.model_validate(
        {**chunks[position].model_dump(), "matching": texts, "matching_vectors": vectors}
    )
    return message.model_copy(update={"chunks": tuple(chunks)})


async def test_a_matching_text_finds_its_chunk_once_and_says_which(store: ChunkStore) -> None:
    sheet = ready("t1", "shop", "sheet", "v1", ["Trail runner 2: grippy sole.", "City sneaker."])
    described = ("A waterproof shoe for running forest trails in the rain.", "A trail shoe.")
    sheet = _with_matching(sheet, 0, described, seed=50)
    await upsert(store.writes, sheet)
    await upsert(store.writes, sheet)  # a redelivery overwrites its matching texts too

    [hit] = await store.view(T1).search(_query(("shop",), "waterproof rain", None))
    assert (hit.uuid, hit.properties["text"]) == (sheet.chunks[0].chunk_id, sheet.chunks[0].text)
    assert hit.properties["matched"] == described[0]

    # Found by its own words and both matching texts: the chunk once, by the best of them.
    both = await store.view(T1).search(
        _query(("shop",), "trail", list(unit_vector(51)), SearchType.HYBRID)
    )
    assert [c.uuid for c in both] == [sheet.chunks[0].chunk_id, sheet.chunks[1].chunk_id]
    assert both[0].properties["matched"] == described[1]

    # Counted as what they are: two chunks of one document.
    assert await store.writes.count_stored(sheet) == 2
    assert await store.view(Scope.of_caller("t1", None, ("*",))).library_stats() == [("shop", 1, 2)]
    rows, total = await store.view(Scope.of_caller("t1", None, ("*",))).documents("shop", {}, 10)
    assert (len(rows), total) == (1, 1)

    newer = ready("t1", "shop", "sheet", "v2", ["Trail runner 3."], sequence=2)
    await upsert(store.writes, newer)
    assert await store.writes.delete_superseded([newer]) == 4  # 2 chunks, 2 matching texts
    assert await store.view(T1).search(_query(("shop",), "waterproof", None)) == []


#: Everyone's documents of tenant t1, as a caller reads them.
T1 = Scope.of_caller("t1", None, ("*",))


def _query(
    libraries: tuple[str, ...],
    text: str,
    vector: list[float] | None,
    search_type: SearchType = SearchType.KEYWORD,
) -> Query:
    return Query(
        libraries=libraries,
        text=text,
        vector=vector,
        search_type=search_type,
        alpha=0.5,
        limit=20,
    )


async def test_every_read_of_a_view_holds_its_scope(store: ChunkStore) -> None:
    """A caller's view sees nothing a reader of its scope may not read, through any of its
    reads; kbus's own (a whole scope, which says why) sees it all."""
    public = ready("t1", "held", "open", "v1", ["the open note", "more open"], seed=10)
    secret = ready("t1", "held", "locked", "v1", ["the lockedword note", "more locked"], seed=20)
    secret = secret.model_copy(
        update={"document": secret.document.model_copy(update={"access": ("hr",)})}
    )
    other = ready("t1", "elsewhere", "far", "v1", ["the lockedword elsewhere"], seed=30)
    for doc in (public, secret, other):
        await upsert(store.writes, doc)
    caller = store.view(Scope.of_caller("t1", ("held",), ("*",)))
    whole = store.view(Scope.whole("t1", ("held",), "the test compares"))
    locked_ids = [c.chunk_id for c in secret.chunks]
    query = _query(("held", "elsewhere"), "lockedword", None)
    assert await caller.search(query) == []
    assert len(await whole.search(query)) == 1  # its libraries only, restricted ones too
    assert await caller.keywords(locked_ids) == {}
    assert set(await whole.keywords(locked_ids)) == set(locked_ids)
    assert await caller.blocks(("held", "locked", "v1"), 0, 5) == []
    assert len(await whole.blocks(("held", "locked", "v1"), 0, 5)) == 2
    rows, total = await caller.documents("held", {}, 10)
    assert ([d["document_id"] for d in rows], total) == (["open"], 1)  # nor counts the locked
    assert await caller.library_stats() == [("held", 1, 2)]
    assert await caller.count_chunks() == 2
    assert await whole.count_chunks() == 4
    assert set((await caller.versions(None, None, 10))[0]) == {"open"}
    assert set((await whole.versions(None, None, 10))[0]) == {"open", "locked"}
    vector = list(secret.chunks[0].vector)
    assert (await whole.best_cosine(("held",), vector) or 0) > 0.999
    assert (await caller.best_cosine(("held",), vector) or 0) < 0.999


def test_a_scope_that_sees_every_document_says_why() -> None:
    with pytest.raises(ValueError, match="says why"):
        Scope.whole("t1", None, "")


async def test_a_republish_of_the_same_version_leaves_nothing_of_the_older_one(
    store: ChunkStore,
) -> None:
    """The same version again with fewer chunks: the positions it lacks are deleted once it is
    complete (the others it overwrote, same ids)."""
    first = ready("t1", "lib", "same", "v1", ["one", "two", "three"], seed=40, sequence=5)
    second = ready("t1", "lib", "same", "v1", ["only"], seed=50, sequence=9)
    await upsert(store.writes, first)
    await upsert(store.writes, second)
    assert await store.writes.delete_superseded([second]) == 2
    whole = store.view(Scope.whole("t1", None, "the test counts"))
    assert await whole.count_chunks() == 1


async def test_tenants_first_written_together_are_made_together(store: ChunkStore) -> None:
    """40 new tenants' first documents written at once, in random order with repeats: each
    tenant is made once, in far fewer requests than tenants, and each holds its document."""
    import asyncio
    import random

    collections = store.writes.collections
    name = await collections.writable(ready("x", "lib", "d", "v1", ["x"]).model)
    await collections.ensure_tenant("warm-up", name)
    maker = collections._makers[(name, id(collections.client.collections))]
    real, made = maker.collection.tenants.create, []

    async def counting(tenants: list[object]) -> None:
        made.append(len(tenants))
        await real(tenants)

    maker.collection.tenants.create = counting
    tenants = [f"crowd{n}" for n in range(40)]
    order = random.Random(57).choices(tenants, k=80) + tenants
    await asyncio.gather(
        *(upsert(store.writes, ready(t, "lib", f"d-{t}", "v1", [f"note of {t}"])) for t in order)
    )
    assert sum(made) == 40
    assert len(made) < 10, made
    for tenant in tenants:
        assert await _search(store, tenant, ("lib",), "note") == [f"d-{tenant}"]


async def test_idle_tenants_are_made_inactive_and_wake_on_their_next_search(
    store: ChunkStore,
) -> None:
    """Of 12 tenants, those left idle are made inactive in one request; the others stay
    active; a search of an inactive one finds its document (Weaviate activates it again)."""
    import random

    from weaviate.classes.tenants import TenantActivityStatus

    collections = store.writes.collections
    tenants = [f"idle{n}" for n in range(12)]
    for tenant in tenants:
        await upsert(store.writes, ready(tenant, "lib", f"d-{tenant}", "v1", [f"memo {tenant}"]))
    name = await collections.writable(ready("x", "lib", "d", "v1", ["x"]).model)
    idle = set(random.Random(59).sample(tenants, 5))
    for tenant in tenants:
        if tenant in idle:
            collections._used[name, tenant] -= 3_600
    assert set(await collections.deactivate_idle(1_800)) == idle
    assert not [t for t in idle if (name, t) in collections._used]  # nothing kept of them
    found = await collections.client.collections.use(name).tenants.get_by_names(tenants)
    for tenant in tenants:
        want = TenantActivityStatus.INACTIVE if tenant in idle else TenantActivityStatus.ACTIVE
        assert found[tenant].activity_status == want, tenant
    assert await collections.deactivate_idle(1_800) == []
    for tenant in sorted(idle):
        assert await _search(store, tenant, ("lib",), "memo") == [f"d-{tenant}"]


async def test_a_tenant_another_process_made_active_is_made_inactive_once_idle_here(
    store: ChunkStore,
) -> None:
    """A tenant this searcher never used, active in the store (another replica's, or from
    before a restart): seen active, then made inactive once idle here as long as any other."""
    from weaviate.classes.tenants import Tenant, TenantActivityStatus

    collections = store.writes.collections
    name = await collections.writable(ready("x", "lib", "d", "v1", ["x"]).model)
    other = "elsewhere-made"
    await collections.client.collections.use(name).tenants.create([Tenant(name=other)])
    assert (name, other) not in collections._used
    assert other not in await collections.deactivate_idle(1_800)  # seen now: not idle yet
    collections._used[name, other] -= 3_600
    assert other in await collections.deactivate_idle(1_800)
    found = await collections.client.collections.use(name).tenants.get_by_names([other])
    assert found[other].activity_status == TenantActivityStatus.INACTIVE
