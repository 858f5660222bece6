"""Per-document access under hostile callers: a credential claims only the principals its
operator bound it to, and a search returns only what the claimed principals may read.

Tenant t0's library lib-b holds 200 documents: 5 everyone may read, the others readable by
one of 100 groups each. 1,000 random searches by four credentials (a bot bound to ten groups,
an operator's tool bound to no one's limit, and two plain ones that may claim no one) claim
random groups, on their own subjects and on the operator's.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from kbus_client import KbClient, KbError
from kbus_contract.errors import ErrorCode
from kbus_contract.tenancy import GRANT_ALL, grant_token
from nats.aio.client import Client
from nats.aio.msg import Msg

from tests.security.conftest import (
    BOT_GROUPS,
    GROUPS,
    TOPOLOGY,
    Locked,
    client_for,
    connect,
    credential,
)

LIBRARY = "lib-b"
WORD = "accessmark"
K = 10
ASKERS = ["t0-bot", "t0-ops", "t0-all", "t0-ro"]
#: The subject of a credential that may act for anyone (only t0-ops holds it).
ANYONE = TOPOLOGY.asked("kb.search", "t0", grant_token(None, None))


def readers() -> dict[str, frozenset[str] | None]:
    """Each document's access (None: everyone), the same on every run."""
    rng = random.Random(46)
    access: dict[str, frozenset[str] | None] = {f"public-{i}": None for i in range(5)}
    access.update({f"held-{i}": frozenset({rng.choice(GROUPS)}) for i in range(195)})
    return access


ACCESS = readers()


@pytest.fixture(scope="module")
async def shared(locked: Locked) -> Locked:
    async with await client_for(locked, "t0-all") as kb:
        for number, (document_id, held) in enumerate(ACCESS.items()):
            await kb.publish_document(
                library=LIBRARY,
                document_id=document_id,
                text=f"The {WORD} note {number} is filed under {document_id}.",
                access=sorted(held) if held else None,
                wait=number == len(ACCESS) - 1,
                timeout_s=300,
            )
        for _ in range(120):  # every document searchable (the last one's receipt came first)
            if len(await kb.documents(LIBRARY, limit=1_000, principals=())) >= 5:
                break
            await asyncio.sleep(0.5)
    return locked


@dataclass(frozen=True)
class Ask:
    asker: str
    claims: tuple[str, ...]
    subject: str

    @property
    def allowed(self) -> bool:
        bound = credential(self.asker).acts_for
        if self.subject == ANYONE and self.asker != "t0-ops":
            return False  # NATS refuses the subject itself
        return bound is None or set(self.claims) <= set(bound)


def _random_asks(n: int) -> list[Ask]:
    rng = random.Random(7)
    asks = []
    for _ in range(n):
        asker = rng.choice(ASKERS)
        pool = BOT_GROUPS if rng.random() < 0.5 else GROUPS
        claims = tuple(rng.sample(pool, rng.randint(0, 3)))
        own = TOPOLOGY.asked("kb.search", "t0", credential(asker).grant)
        asks.append(Ask(asker, claims, ANYONE if rng.random() < 0.1 else own))
    return asks


def _visible(claims: tuple[str, ...]) -> set[str]:
    return {d for d, held in ACCESS.items() if held is None or held & set(claims)}


async def _ask(nc: Client, ask: Ask) -> tuple[str, list[str]]:
    """The error code (empty: answered) and the documents returned."""
    body = {
        "tenant": "t0",
        "libraries": [LIBRARY],
        "query": WORD,
        "search_type": "keyword",
        "rerank": False,
        "k": K,
        "principals": list(ask.claims),
    }
    try:
        reply = json.loads(
            (await nc.request(ask.subject, json.dumps(body).encode(), timeout=5)).data
        )
    except Exception as exc:  # a refused subject: no responder ever answers
        return f"refused: {type(exc).__name__}", []
    if reply["kind"] == "error":
        return reply["error"]["code"], []
    return "", [hit["document_id"] for hit in reply["results"]]


async def test_a_thousand_random_claims_return_nothing_outside_the_claimed_principals(
    shared: Locked,
) -> None:
    asks = _random_asks(1_000)
    clients = {name: await connect(shared, name) for name in ASKERS}
    limit = asyncio.Semaphore(16)

    async def one(ask: Ask) -> tuple[str, list[str]]:
        async with limit:
            return await _ask(clients[ask.asker], ask)

    try:
        outcomes = await asyncio.gather(*(one(a) for a in asks))
    finally:
        for nc in clients.values():
            await nc.close()
    tally: Counter[str] = Counter()
    outside = wrong_k = 0
    for ask, (code, found) in zip(asks, outcomes, strict=True):
        if not ask.allowed:
            tally["refused" if code else "ACCEPTED BEYOND BOUND"] += 1
            if ask.subject != ANYONE:
                assert code == "principal_not_granted", (ask, code)
            continue
        assert code == "", (ask, code)
        tally["answered"] += 1
        visible = _visible(ask.claims)
        outside += len(set(found) - visible)
        wrong_k += len(found) != min(K, len(visible))
        tally["restricted hits"] += sum(1 for d in found if ACCESS[d] is not None)
    print(f"\n1,000 searches: {dict(tally)}")
    assert outside == 0
    assert tally["ACCEPTED BEYOND BOUND"] == 0
    assert wrong_k == 0  # the filter is in the store query: k is filled from what may be read
    assert tally["refused"] > 200  # both kinds were tried
    assert tally["answered"] > 300
    assert tally["restricted hits"] > 300  # the claims did open restricted documents


async def test_a_bound_credential_may_not_ask_on_another_credential_s_subject(
    shared: Locked,
) -> None:
    """Neither on the subject of one that acts for anyone, nor on the plain grant's."""
    plain = TOPOLOGY.asked("kb.search", "t0", GRANT_ALL)
    for subject in (ANYONE, plain):
        errors: list[str] = []
        nc = await connect(shared, "t0-bot", errors)
        try:
            code, _ = await _ask(nc, Ask("t0-bot", ("g50",), subject))
            await asyncio.sleep(0.3)
        finally:
            await nc.close()
        assert code.startswith("refused"), subject
        assert any(
            "permissions violation" in e.lower() and subject.lower() in e.lower() for e in errors
        ), (subject, errors)


#: What only the restricted document and its dead letter hold.
HIDDEN = "hiddenmark"


async def _listen(nc: Client, subjects: list[str], heard: list[tuple[str, bytes]]) -> None:
    async def on(msg: Msg) -> None:
        heard.append((msg.subject, msg.data))

    for subject in subjects:
        await nc.subscribe(subject, cb=on)
    await nc.flush()


def _records(restricted: bool) -> list[str]:
    """Every receipt and dead-letter subject of t0's libraries, of one kind of form."""
    names = ("document.indexed", "document.failed", "document.removed")
    subjects = [TOPOLOGY.subject(n, restricted, tenant="t0", library="*") for n in names]
    return [*subjects, TOPOLOGY.dead_letters_of("t0", None, restricted)]


async def _publish_records(kb: KbClient) -> None:
    """An everyone's and a restricted document: each indexed, then a broken copy of each
    dead-lettered (its title in the letter), then each deleted."""
    for document_id, access in (("open-doc", None), ("held-doc", ["g50"])):
        word = HIDDEN if access else "openmark"
        await kb.publish_document(
            library=LIBRARY,
            document_id=document_id,
            text=f"The {word} note.",
            access=access,
            wait=True,
            timeout_s=120,
        )
        # Well-formed (the gate stores it), but no JSON records to read: the ingestor's.
        broken: dict[str, Any] = {"tenant": "t0", "library": LIBRARY, "title": word}
        broken |= {"text": f"{word} is not JSON", "content_type": "application/json"}
        broken |= {"template": {"text": "{body}"}}
        broken |= {"document_id": f"{document_id}-bad", "access": access}
        await kb.nc.jetstream().publish(TOPOLOGY.added("t0", LIBRARY), json.dumps(broken).encode())
        await kb.delete_document(library=LIBRARY, document_id=document_id, wait=True)


async def _until(heard: list[tuple[str, bytes]], count: int) -> None:
    for _ in range(240):
        if len(heard) >= count:
            return
        await asyncio.sleep(0.25)


async def test_what_names_a_restricted_document_reaches_only_those_who_may_name_it(
    shared: Locked,
) -> None:
    """Receipts, removals and dead letters (which hold the text) of a document the bot may not
    read go on the forms ending in .restricted: the bot hears only the everyone's document's,
    is refused the restricted forms and the feed's, and reads neither back from its feed; the
    publisher and the operator's tool hear both."""
    heard: dict[str, list[tuple[str, bytes]]] = {"t0-bot": [], "t0-ops": []}
    errors: list[str] = []
    bot = await connect(shared, "t0-bot", errors)
    ops = await connect(shared, "t0-ops")
    try:
        await _listen(bot, _records(False), heard["t0-bot"])
        await _listen(ops, _records(False) + _records(True), heard["t0-ops"])
        await _listen(bot, _records(True), [])  # each refused by the server
        async with await client_for(shared, "t0-all") as kb:
            await _publish_records(kb)
            await _until(heard["t0-ops"], 8)  # indexed, dead letter, failed, removed: twice
            await asyncio.sleep(0.5)
            written = await kb.feed("dead_letters", restricted=True, limit=500)
    finally:
        await bot.close()
        await ops.close()
    kinds = {name: Counter(TOPOLOGY.channel_of(s) for s, _ in got) for name, got in heard.items()}
    print(f"\nheard: {kinds}")
    assert not [s for s, data in heard["t0-bot"] if b"held-doc" in data or HIDDEN.encode() in data]
    assert kinds["t0-bot"] == Counter(
        {"document.indexed": 1, "deadletter": 1, "document.failed": 1, "document.removed": 1}
    )
    assert kinds["t0-ops"] == Counter({k: 2 * n for k, n in kinds["t0-bot"].items()})
    refused = [e for e in errors if "permissions violation" in e.lower()]
    assert len(refused) == len(_records(True)), errors  # each restricted form
    assert "held-doc-bad" in json.dumps([e.message for e in written.entries])
    async with await client_for(shared, "t0-bot") as reader:
        read = json.dumps([e.message for e in (await reader.feed("dead_letters")).entries])
        assert HIDDEN not in read
        assert "open-doc-bad" in read
        reader.timeout_s = 3.0  # the server drops the request: nothing ever answers
        with pytest.raises(KbError):
            await reader.feed("dead_letters", restricted=True)
        with pytest.raises(KbError):  # nor may it count or list the restricted documents
            await reader.stats(restricted=True)


async def test_a_request_past_a_credential_s_rights_is_named_a_refusal_at_once(
    locked: Locked,
) -> None:
    """The bus drops a request past a credential's rights (another tenant's subject, the
    restricted form a bot lacks) and tells the connection: the client says the request was
    refused, with its subject, and ends it then, not after its whole wait as a timeout."""
    async with await client_for(locked, "t0-bot") as bot:
        asks = {
            "another tenant": bot.search("anything", libraries=[LIBRARY], tenant="t1"),
            "restricted": bot.feed("dead_letters", restricted=True),
        }
        for what, asking in asks.items():
            with pytest.raises(KbError) as refused:  # a wait out would be searcher_timeout
                await asking
            assert refused.value.code == ErrorCode.PERMISSION_DENIED, (what, refused.value)
            assert "refused" in str(refused.value), what
        answer = await bot.search("anything", libraries=[LIBRARY])  # still connected
        assert answer.results is not None
