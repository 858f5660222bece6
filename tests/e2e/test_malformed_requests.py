"""Malformed requests get a client's error, never a server's: every request a tenant may send
(the catalog's channels a client sends and a service answers), from a valid seed, mutated at
random (a field removed, retyped, made huge, nested, added; the body cut or not JSON at all),
is answered in time with a valid reply or an error of the request itself (``invalid_message``
naming the field, a refusal in the 400s), never a store, bus or internal error, and no service
logs a traceback meanwhile."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pytest
from kbus_contract.catalog import CHANNELS
from kbus_contract.errors import ErrorCode
from kbus_contract.tenancy import GRANT_ALL
from nats.aio.client import Client

from tests.e2e.conftest import Stack

TENANT, LIBRARY = "fuzz", "lib"
ROUNDS = 25
#: What a request's own fault may be answered with (every other code is the server's).
REQUEST_FAULTS = {
    ErrorCode.INVALID,
    ErrorCode.INVALID_MESSAGE,
    ErrorCode.TENANT_MISMATCH,
    ErrorCode.LIBRARY_MISMATCH,
    ErrorCode.LIBRARY_NOT_GRANTED,
    ErrorCode.PRINCIPAL_NOT_GRANTED,
    ErrorCode.READ_ONLY,
    ErrorCode.QUOTA_EXCEEDED,
    ErrorCode.TOO_LARGE,
    ErrorCode.TOO_MANY_CANDIDATES,
    ErrorCode.BAD_CURSOR,
    ErrorCode.BAD_PROFILE,
    ErrorCode.NO_PROMPT,
}
SEEDS: dict[str, dict[str, Any]] = {
    "document.added": {
        "tenant": TENANT,
        "library": LIBRARY,
        "document_id": "d1",
        "title": "A title",
        "text": "The badge office is on floor two.",
        "metadata": {"team": "it", "year": 2024},
    },
    "document.deleted": {"tenant": TENANT, "library": LIBRARY, "document_id": "d1"},
    "document.synced": {"tenant": TENANT, "library": LIBRARY, "source": "src", "entries": []},
    "document.body": {
        "name": "part",
        "size": 3,
        "part": 0,
        "data": base64.b64encode(b"abc").decode(),
    },
    "kb.search": {
        "tenant": TENANT,
        "libraries": [LIBRARY],
        "query": "where is the badge office?",
        "k": 5,
        "filters": {"team": "it"},
        "budget_tokens": 500,
    },
    "kb.backlog": {"tenant": TENANT},
    "kb.stats": {"tenant": TENANT, "library": LIBRARY},
    "kb.feed": {"tenant": TENANT},
    "kb.versions": {"tenant": TENANT, "library": LIBRARY},
    "kb.profile": {"tenant": TENANT, "library": LIBRARY},
    "kb.readprofile": {"tenant": TENANT, "library": LIBRARY},
}
ASKED = [c for c in CHANNELS if "client" in c.senders and c.reply is not None]


def _value(rng: random.Random) -> Any:
    return rng.choice(
        [
            None,
            True,
            -1,
            0,
            2**63,
            -(2**70),
            1e308,
            "",
            " ",
            "x" * rng.choice([1, 300, 70_000]),
            "*.>",
            "\u0000\ud7ff\U0010ffff",
            [],
            [None, 1, "a"],
            {},
            {"a": {"b": {"c": [1]}}},
            [[[[[[[[[[[]]]]]]]]]]],
        ]
    )


def _mutated(rng: random.Random, seed: dict[str, Any]) -> bytes:
    body = json.loads(json.dumps(seed))
    kind = rng.randrange(8)
    if kind == 0:
        return rng.choice([b"", b"{", b"null", b"[]", b'"text"', b"\xff\xfe", b"{" * 5_000])
    for _ in range(rng.randint(1, 3)):
        key = rng.choice(sorted(body) or ["tenant"])
        if kind == 1:
            body.pop(key, None)
        elif kind == 2:
            body[f"extra_{rng.randrange(9)}"] = _value(rng)
        else:
            body[key] = _value(rng)
    if kind == 3:
        body["tenant"] = TENANT  # the tenant kept: the mutation reaches the service's own checks
    return json.dumps(body).encode()


def _server_faults(channel: str, data: bytes) -> str | None:
    """What in a reply is the server's fault (None: a valid reply or the request's own)."""
    try:
        reply = json.loads(data)
    except ValueError:
        return f"{channel}: a reply that is not JSON: {data[:200]!r}"
    if not isinstance(reply, dict):
        return f"{channel}: a reply that is not an object: {data[:200]!r}"
    error = reply.get("error")
    if error is None:
        return None
    if "err_code" in error:  # the gate's refusal, shaped as JetStream's
        return None if 400 <= error["code"] < 500 else f"{channel}: refused {error}"
    if error.get("code") not in REQUEST_FAULTS:
        return f"{channel}: {error.get('code')}: {error.get('message')}"
    if error["code"] == ErrorCode.INVALID_MESSAGE and not error.get("message"):
        return f"{channel}: invalid_message that names nothing"
    return None


def _log_sizes(logs: Path) -> dict[Path, int]:
    return {path: path.stat().st_size for path in logs.glob("*.log")}


@pytest.mark.parametrize("seed", [1, 2])
async def test_random_mutations_of_every_request_get_a_client_s_error_never_a_server_s(
    stack: Stack, nc: Client, seed: int
) -> None:
    rng = random.Random(seed)
    assert {c.name for c in ASKED} == set(SEEDS), "a request a tenant may send has no seed"
    before = _log_sizes(stack.logs)
    faults = []
    for channel in ASKED:
        subject = stack.topology.subject(
            channel.name, False, tenant=TENANT, library=LIBRARY, grant=GRANT_ALL
        )
        for _ in range(ROUNDS):
            data = _mutated(rng, SEEDS[channel.name])
            try:
                answer = await nc.request(subject, data, timeout=15)
            except Exception as exc:  # no reply in time, or none at all
                faults.append(f"{channel.name}: {type(exc).__name__} for {data[:200]!r}")
                continue
            fault = _server_faults(channel.name, answer.data)
            if fault:
                faults.append(f"{fault} (sent {data[:200]!r})")
    assert faults == [], "\n".join(faults[:20])
    for path in _log_sizes(stack.logs):
        with path.open("rb") as log:
            log.seek(before.get(path, 0))
            assert b"Traceback" not in log.read(), f"{path.name} logged a traceback"
