"""Library profiles on a real NATS: set and read over kb.profile, refused with the reason when
they cannot work, and applied to the documents ingested after them."""

from __future__ import annotations

import json
import math
import random
import time
from contextlib import AsyncExitStack

from faststream import TestApp
from kbus_client import KbClient, KbError
from kbus_contract import (
    Chunker,
    ChunkerKind,
    ChunksReady,
    DeadLetter,
    LibraryProfile,
    Matching,
    MatchingKind,
    ProfileReply,
    RerankerKind,
    Reranking,
    Transformer,
    TransformerKind,
)
from kbus_contract.topology import Topology
from kbus_contract.wire import CHAT_CHECK_S
from kbus_dev.llm import MODEL_NAME
from kbus_dev.servers import free_port
from kbus_generator.app import create_app as generator_app
from kbus_generator.settings import GeneratorSettings
from kbus_ingestor.app import create_app
from kbus_ingestor.chat_links import FRESH_S, chat_links
from kbus_ingestor.settings import IngestorSettings
from kbus_reranker.app import create_app as reranker_app
from kbus_reranker.settings import RerankerSettings
from kbus_runtime.chat import LLMSettings
from kbus_runtime.settings import BusSettings
from nats.aio.client import Client

from tests.helpers import LLMRecorder, ask, document, publish_raw, read_stream, take_work

SHEET = (
    "Product: Trail runner 2\nA light shoe for wet forest paths.\n\n"
    "Product: City sneaker\nA white leather shoe for offices.\n"
)
PRODUCTS = LibraryProfile(chunker=Chunker(kind=ChunkerKind.PATTERN, pattern="^Product:"))


async def _refusal(kb: KbClient, profile: LibraryProfile, example: str | None = None) -> KbError:
    try:
        await kb.profile("products", set_to=profile, example=example)
    except KbError as exc:
        return exc
    raise AssertionError("the profile was kept")


async def test_a_profile_is_kept_with_a_revision_and_refused_when_it_cannot_work(
    nc: Client, bus: BusSettings, topology: Topology
) -> None:
    async with TestApp(create_app(IngestorSettings(bus=bus))):
        kb = KbClient(nc, prefix=topology.prefix, tenant="shop")
        before = await kb.profile("products")
        assert (before.revision, before.profile) == (0, LibraryProfile())

        kept = await kb.profile("products", set_to=PRODUCTS, example=SHEET)
        assert (kept.profile, kept.example_chunks) == (PRODUCTS, 2)
        assert (await kb.profile("products")).revision == kept.revision > 0

        lookbehind = LibraryProfile(
            chunker=Chunker(kind=ChunkerKind.PATTERN, pattern="(?<=\n)Product:")
        )
        refused = await _refusal(kb, lookbehind)
        assert (refused.code, "RE2" in str(refused)) == ("bad_profile", True)
        elsewhere = LibraryProfile(chunker=Chunker(kind=ChunkerKind.PATTERN, pattern="^Item:"))
        nothing = await _refusal(kb, elsewhere, example=SHEET)
        assert "matches nothing" in str(nothing)
        # Refusals keep nothing: the profile is still the one that was set.
        assert (await kb.profile("products")).revision == kept.revision

        # The body's tenant must be the subject's (the credential's).
        raw = {"tenant": "other", "library": "products"}
        reply = await ask(nc, topology, json.dumps(raw).encode(), kind="profile", tenant="shop")
        assert json.loads(reply.data)["error"]["code"] == "tenant_mismatch"
        unknown = {"tenant": "shop", "library": "products", "profile": {"chunker": {"kind": "x"}}}
        reply = await ask(nc, topology, json.dumps(unknown).encode(), kind="profile")
        assert json.loads(reply.data)["error"]["code"] == "invalid_message"

        # The readers' subject reads (the client's own reads go there) and sets nothing.
        other = {"tenant": "shop", "library": "products", "profile": {}}
        reply = await ask(nc, topology, json.dumps(other).encode(), kind="readprofile")
        assert json.loads(reply.data)["error"]["code"] == "read_only"
        read = {"tenant": "shop", "library": "products"}
        reply = await ask(nc, topology, json.dumps(read).encode(), kind="readprofile")
        assert json.loads(reply.data)["revision"] == kept.revision


async def test_documents_are_cut_by_their_library_s_profile_and_too_long_ones_refused(
    nc: Client, bus: BusSettings, topology: Topology
) -> None:
    async with TestApp(create_app(IngestorSettings(bus=bus))):
        kb = KbClient(nc, prefix=topology.prefix, tenant="shop")
        await kb.profile("products", set_to=PRODUCTS)
        whole = LibraryProfile(chunker=Chunker(kind=ChunkerKind.IDENTITY, max_chars=300))
        await kb.profile("faq", set_to=whole)
        answer = "Returns are free within 30 days. " * 6
        for library, doc_id, text in (
            ("products", "sheet", SHEET),
            ("faq", "returns", answer),
            ("faq", "long", "Too long to keep whole. " * 20),
            ("manuals", "sheet", SHEET),
        ):
            await publish_raw(
                nc, topology, json.dumps(document("shop", library, doc_id, text)).encode()
            )
        own = document("shop", "catalogue", "own", "", chunks=["Kettle.", "Toaster. Two slots."])
        await publish_raw(nc, topology, json.dumps(own).encode())
        ready = [
            ChunksReady.model_validate(r)
            for r in await take_work(nc, topology.chunks_ready, "embedder", count=4)
        ]
        [letter] = await read_stream(nc, topology.dead_letters, count=1)
    cut = {r.document.library: [c.text for c in r.chunks] for r in ready}
    assert [t.split("\n")[0] for t in cut["products"]] == [
        "Product: Trail runner 2",
        "Product: City sneaker",
    ]
    assert cut["faq"] == [answer.strip()]
    # A library without a profile is cut by size as before: the whole sheet fits one chunk.
    assert cut["manuals"] == [SHEET.strip()]
    # A publisher's own chunks are kept as given.
    assert cut["catalogue"] == ["Kettle.", "Toaster. Two slots."]
    dead = DeadLetter.model_validate(letter)
    assert (dead.document_id, dead.code) == ("long", "too_large")
    assert "identity chunker keeps at most 300" in dead.reason


def _markdown(rng: random.Random) -> str:
    """A Markdown document of a few sections of random lengths (some past a chunk)."""
    words = [
        "boiler",
        "key",
        "badge",
        "printer",
        "floor",
        "lunch",
        "parking",
        "visitor",
        "kettle",
        "desk",
    ]
    parts = []
    for n in range(rng.randint(1, 5)):
        level = "#" * rng.randint(1, 3)
        body = " ".join(rng.choices(words, k=rng.randint(5, 260))) + "."
        parts.append(f"{level} Part {n}\n\n{body}\n")
    return "\n".join(parts)


async def test_an_example_is_cut_as_ingesting_the_same_markdown_cuts_it(
    nc: Client, bus: BusSettings, topology: Topology
) -> None:
    """The count `kbus profile --example` shows is the chunks the same file gets when it is
    ingested, for every chunker kind and random Markdown (issue 58: sections said 1, not 5)."""
    rng = random.Random(58)
    kinds = [
        Chunker(kind=ChunkerKind.SECTIONS, max_chars=600),
        Chunker(kind=ChunkerKind.RECURSIVE, size=300, overlap=30),
        Chunker(kind=ChunkerKind.PATTERN, pattern="^#"),
    ]
    async with TestApp(create_app(IngestorSettings(bus=bus))):
        kb = KbClient(nc, prefix=topology.prefix, tenant="shop")
        for n, chunker in enumerate(kinds * 3):
            library, text = f"lib{n}", _markdown(rng)
            said = await kb.profile(library, set_to=LibraryProfile(chunker=chunker), example=text)
            doc = document("shop", library, "d", text, content_type="text/markdown")
            await publish_raw(nc, topology, json.dumps(doc).encode())
            parts = [
                ChunksReady.model_validate(r)
                for r in await take_work(nc, topology.chunks_ready, "embedder", count=1)
            ]
            assert said.example_chunks == parts[0].total_chunks, (chunker, text)


async def test_a_profile_is_kept_only_when_the_chat_models_its_new_links_need_answer(
    nc: Client, bus: BusSettings, topology: Topology, llm: str
) -> None:
    """Each link that needs a chat model asks the service that prompts it: here the generator
    runs on a model that is down, the reranker on the real one, and no searcher runs. Random
    profiles are kept exactly when every link they newly name is served, and a refusal names
    each link that is not and keeps nothing. However many profiles ask, the generator is asked
    at most once per FRESH_S (a tenant's profile writes cannot crowd out another's answers)."""
    dead = LLMSettings(url=f"http://127.0.0.1:{free_port()}/v1", model=MODEL_NAME)
    live = LLMSettings(url=llm, model=MODEL_NAME, timeout_s=60)
    served = {"generator": False, "reranker": True, "searcher": False}
    rng = random.Random(5)
    async with AsyncExitStack() as apps:
        await apps.enter_async_context(TestApp(create_app(IngestorSettings(bus=bus))))
        await apps.enter_async_context(TestApp(generator_app(GeneratorSettings(bus=bus, llm=dead))))
        reranking = RerankerSettings(
            bus=bus, prompted="openai", llm=live, token_states=False, query_states=False
        )
        await apps.enter_async_context(TestApp(reranker_app(reranking)))
        kb = KbClient(nc, prefix=topology.prefix, tenant="shop")
        outcomes, asking = set(), 0
        # Every ask of this test's generator (its own prefix: other tests' micro services of
        # the same name on this server are not counted).
        asks = await nc.subscribe(topology.subject("kb.chat.generator"))
        started = time.monotonic()
        for _ in range(14):
            kept = await kb.profile("chained")
            profile = _random_chain(rng)
            new = {
                s: link
                for s, link in chat_links(profile).items()
                if chat_links(kept.profile).get(s) != link
            }
            missing = [s for s in new if not served[s]]
            asking += "generator" in new
            reply = await _outcome(kb, profile)
            if isinstance(reply, KbError):
                assert missing, f"refused though every link is served: {reply}"
                assert reply.code == "bad_profile"
                said = str(reply)
                assert all(new[s] in said for s in missing), said
                assert "no searcher is running" in said or "searcher" not in missing
                assert "does not answer" in said or "generator" not in missing
                assert (await kb.profile("chained")).revision == kept.revision
                outcomes.add("refused")
            else:
                assert not missing, f"kept though {missing} cannot serve it"
                assert reply.profile == profile
                outcomes.add("kept")
        elapsed = time.monotonic() - started
        asked = asks.pending_msgs
        await asks.unsubscribe()
    assert outcomes == {"kept", "refused"}
    # An answer is kept FRESH_S from when it came: asks start at least that far apart.
    most = math.floor(elapsed / FRESH_S) + 1
    assert 1 <= asked <= most < asking, (asked, most, asking)


#: Seconds each answer of a busy model waits in its queue: several, as a hosted model's first
#: answer under load or a small local one on a loaded CPU takes, and within CHAT_CHECK_S.
BUSY_S = 7.0


async def test_a_busy_model_is_not_a_down_one(
    nc: Client, bus: BusSettings, topology: Topology, llm: str
) -> None:
    """A profile whose prompted reranker's model answers, only seconds late, is kept, and the
    client that set it waited for the check (a refused connection is refused at once above)."""
    assert BUSY_S < CHAT_CHECK_S
    with LLMRecorder(llm, delay_s=BUSY_S) as busy:
        model = LLMSettings(url=busy.url, model=MODEL_NAME, timeout_s=60)
        reranking = RerankerSettings(
            bus=bus, prompted="openai", llm=model, token_states=False, query_states=False
        )
        async with AsyncExitStack() as apps:
            await apps.enter_async_context(TestApp(create_app(IngestorSettings(bus=bus))))
            await apps.enter_async_context(TestApp(reranker_app(reranking)))
            kb = KbClient(nc, prefix=topology.prefix, tenant="shop")
            judged = LibraryProfile(
                reranker=Reranking(kind=RerankerKind.PROMPTED, instruction="Same product.")
            )
            started = time.monotonic()
            reply = await kb.profile("busy", set_to=judged)
    assert reply.profile == judged
    assert time.monotonic() - started >= BUSY_S


async def _outcome(kb: KbClient, profile: LibraryProfile) -> ProfileReply | KbError:
    try:
        return await kb.profile("chained", set_to=profile)
    except KbError as exc:
        return exc


def _random_chain(rng: random.Random) -> LibraryProfile:
    matching = rng.choice([Matching(), Matching(kind=MatchingKind.QUESTIONS, count=2)])
    transformer = rng.choice(
        [
            Transformer(),
            Transformer(kind=TransformerKind.NONE),
            Transformer(kind=TransformerKind.QUESTION),
        ]
    )
    reranker = rng.choice(
        [
            Reranking(),
            Reranking(kind=RerankerKind.NONE),
            Reranking(kind=RerankerKind.PROMPTED, instruction="Same product."),
        ]
    )
    return LibraryProfile(matching=matching, transformer=transformer, reranker=reranker)
