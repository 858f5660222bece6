"""The attacks of ``test_attacks.py`` made with the official ``nats`` command line (natscli
v0.5.0), as a tenant holding a credential file would make them."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from kbus_client import KbClient
from kbus_contract import DocumentAdded
from kbus_contract.lanes import Lane
from kbus_dev.natsauth import inbox
from kbus_dev.servers import NATSCLI, ensure_binary

from tests.security.conftest import (
    LIBRARY,
    TOPOLOGY,
    VICTIM,
    VICTIMS,
    Locked,
    Observer,
    creds_file,
    still_readable,
    victim_finds,
    victim_publishes,
)

T = TOPOLOGY
#: The consumer the ingestor takes the victim's documents through (fair share).
VICTIM_LANE = T.stage("ingestor").lane_consumer(VICTIM, Lane.BULK)
ATTACKER = "t1-all"


def nats(locked: Locked, *args: str, user: str = ATTACKER) -> subprocess.CompletedProcess[str]:
    """The nats command line as ``user``; its exit status and output."""
    return subprocess.run(
        [
            str(ensure_binary(*NATSCLI)),
            "--no-context",
            f"--server={locked.nats_url}",
            f"--creds={creds_file(locked, user)}",
            f"--inbox-prefix={inbox(user)}",
            "--timeout=2s",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


async def cli(locked: Locked, *args: str, user: str = ATTACKER) -> subprocess.CompletedProcess[str]:
    """:func:`nats` on a thread: the test's own connections (the observer's) go on reading."""
    return await asyncio.to_thread(nats, locked, *args, user=user)


def refused(result: subprocess.CompletedProcess[str]) -> bool:
    """The command failed, or the server refused what it sent (``nats req`` exits 0 after a
    permissions violation and prints it)."""
    said = result.stderr.lower()
    return result.returncode != 0 or "permissions violation" in said or "no responders" in said


async def test_the_cli_creates_no_stream_and_reads_no_consumer(
    locked: Locked, victim: KbClient, observer: Observer, tmp_path: Path
) -> None:
    store = T.bodies_stream.name
    config = tmp_path / "capture.json"
    config.write_text(
        json.dumps(
            {
                "name": store,
                "subjects": ["kb.>", f"{T.accepted('document.body')}.>"],
                "storage": "file",
                "max_bytes": -1,
                "num_replicas": 1,
                "sources": [{"name": s.name} for s in T.streams],
                "republish": {"src": f"{T.accepted('document.body')}.>", "dest": "document.>"},
            }
        )
    )
    before = await observer.stream(store)
    attempts = [
        await cli(locked, "stream", "add", store, f"--config={config}"),
        await cli(locked, "stream", "edit", store, f"--config={config}", "--force"),
        await cli(locked, "stream", "ls"),
        await cli(locked, "stream", "info", T.documents_stream.name),
        await cli(locked, "consumer", "info", T.documents_stream.name, VICTIM_LANE),
        await cli(locked, "consumer", "rm", T.documents_stream.name, VICTIM_LANE, "--force"),
        await cli(locked, "consumer", "next", T.receipts_stream.name, "anything", "--count=1"),
        await cli(
            locked,
            "consumer",
            "add",
            T.receipts_stream.name,
            "evil",
            f"--filter={T.indexed_of('t1')}",
            f"--target={T.in_lane('chunks.ready', Lane.BULK, tenant=VICTIM)}",
            "--defaults",
        ),
        await cli(locked, "kv", "ls"),
        await cli(locked, "req", f"$JS.API.STREAM.CREATE.{store}", config.read_text()),
    ]
    granted = [(a.args[7:], a.stdout[:200], a.stderr[:200]) for a in attempts if not refused(a)]
    assert granted == []
    after = await observer.stream(store)
    assert before is not None
    assert after is not None
    assert after["config"] == before["config"]  # as kbus declared it
    names = [c["name"] for c in await observer.consumers(T.documents_stream.name)]
    assert VICTIM_LANE in names
    assert await still_readable(victim)


async def test_the_cli_cannot_squat_a_publish_or_land_a_reply(
    locked: Locked, victim: KbClient, observer: Observer
) -> None:
    doc = DocumentAdded(
        tenant=VICTIM,
        library=LIBRARY,
        document_id="cli-squatted",
        title="Squatted",
        text="clisquattedword for its owner only",
    )
    planted = doc.model_copy(update={"document_id": "cli-replied", "text": "clirepliedword"})
    own = T.added("t1", LIBRARY)
    nats(locked, "pub", own, "{}", "-H", f"Nats-Msg-Id:{doc.message_id()}")
    for target in (T.added(VICTIM, LIBRARY), *_pipeline_subjects(VICTIM)):
        nats(locked, "pub", own, planted.model_dump_json(), f"--reply={target}")
        nats(locked, "pub", T.asked("kb.search", "t1"), '{"tenant": "t1"}', f"--reply={target}")
    subscribing = [nats(locked, "sub", subject, "--count=1") for subject in (">", "document.>")]
    assert all(refused(s) for s in subscribing)
    await victim_publishes(victim, doc)
    await asyncio.sleep(3)
    assert await victim_finds(victim, "clirepliedword") == []
    # What lands there is the victim's own publish and its pipeline: no planted text, no
    # server's or service's reply.
    landed = observer.heard_on(*VICTIMS, T.chunks_ready, T.embeddings_ready)
    assert landed, "the victim's publish was heard"
    strays = [s for s, data in landed if b"clirepliedword" in data or _a_reply(data)]
    assert strays == [], strays


def _pipeline_subjects(tenant: str) -> tuple[str, ...]:
    """A tenant's subjects between kbus's services."""
    return tuple(
        T.in_lane(name, lane, tenant=tenant)
        for name in ("chunks.ready", "embeddings.ready")
        for lane in Lane
    )


def _a_reply(data: bytes) -> bool:
    """A JetStream acknowledgement or a kbus reply (what a reply subject would carry)."""
    try:
        body = json.loads(data)
    except ValueError:
        return False
    return isinstance(body, dict) and (("stream" in body and "seq" in body) or "kind" in body)


@pytest.mark.parametrize("kind", ["receipts", "dead_letters"])
def test_a_tenant_reads_its_own_receipts_and_dead_letters_with_the_cli(
    locked: Locked, victim: KbClient, kind: str
) -> None:
    """The documented recipe (docs/security.md): kb.feed, answered for the credential's own
    tenant only."""
    own = nats(
        locked,
        "req",
        T.asked("kb.feed", VICTIM),
        json.dumps({"tenant": VICTIM, "kind": kind}),
        user=f"{VICTIM}-all",
    )
    assert own.returncode == 0, own.stderr
    reply = json.loads(own.stdout.strip().splitlines()[-1])
    assert reply["kind"] == "feed"
    assert all(e["message"]["tenant"] == VICTIM for e in reply["entries"])
    if kind == "receipts":
        assert any(e["message"].get("document_id") == "victim-doc" for e in reply["entries"])
    other = nats(
        locked, "req", T.asked("kb.feed", VICTIM), json.dumps({"tenant": VICTIM, "kind": kind})
    )
    assert refused(other) or "error" in other.stdout


def _valid(tenant: str, document_id: str, text: str) -> str:
    return DocumentAdded(
        tenant=tenant, library=LIBRARY, document_id=document_id, title=document_id, text=text
    ).model_dump_json()


async def test_the_cli_s_headers_steer_no_service_and_fish_nothing(
    locked: Locked, victim: KbClient, observer: Observer
) -> None:
    """Findings 1, 2 and 9 as the CLI makes them: a ``reply_to`` header naming the victim's
    receipts, a message id the victim then uses, and expectation headers fishing for the
    victim's last id: nothing lands, the victim's publish is no duplicate, no answer names the
    victim's messages or the shared stream's sequence."""
    target = T.failed(VICTIM, LIBRARY)
    own = T.added("t1", LIBRARY)
    steered = await cli(
        locked, "pub", own, _valid("t1", "cli-steer", "steered"), "-H", f"reply_to:{target}"
    )
    assert steered.returncode == 0, steered.stderr
    squat = await cli(
        locked,
        "pub",
        "--jetstream",
        own,
        _valid("t1", "cli-squat", "x"),
        "-H",
        "Nats-Msg-Id:cli-2027",
    )
    assert squat.returncode == 0, squat.stderr
    body = _valid(VICTIM, "cli-policy", "The clipolicyword is the victim's own.")
    mine = await cli(
        locked,
        "req",
        T.added(VICTIM, LIBRARY),
        body,
        "-H",
        "Nats-Msg-Id:cli-2027",
        user=f"{VICTIM}-all",
    )
    fished = await cli(
        locked, "req", own, _valid("t1", "cli-fish", "x"), "-H", "Nats-Expected-Last-Msg-Id:x"
    )
    await asyncio.sleep(5)
    assert observer.landed(target) == []
    stored = json.loads(mine.stdout.strip().splitlines()[-1])
    assert stored.get("duplicate") is not True, mine.stdout
    assert "error" not in stored, mine.stdout
    answer = fished.stdout + fished.stderr
    assert VICTIM not in answer, answer
    assert "wrong last msg" not in answer.lower(), answer
    assert json.loads(fished.stdout.strip().splitlines()[-1])["seq"] == 0
    for _ in range(60):
        if await victim_finds(victim, "clipolicyword") == ["cli-policy"]:
            break
        await asyncio.sleep(0.5)
    assert await victim_finds(victim, "clipolicyword") == ["cli-policy"]
