"""What a model or a person reads: a degraded answer says so wherever it is shown, and a
model's arguments are read leniently or refused in one sentence."""

from __future__ import annotations

import random

import pytest
from kbus_client import degraded_note, format_for_model
from kbus_client.tool import tool_arguments
from kbus_contract import DegradedReason

from tests.helpers import search_reply


@pytest.mark.parametrize("reason", list(DegradedReason))
def test_every_degraded_answer_says_what_was_left_out(reason: DegradedReason) -> None:
    reply = search_reply("d1", degraded=True, degraded_reason=reason)
    note = degraded_note(reply)
    assert note.startswith(f"Note: a degraded answer ({reason.value}): ")
    assert format_for_model(reply).startswith(note)
    assert degraded_note(search_reply("d1")) == ""


def test_a_model_s_arguments_are_read_leniently_or_refused_in_one_sentence() -> None:
    assert tool_arguments('{"query": "vpn", "k": "5"}').k == 5
    rng = random.Random(58)
    junk: list[object] = ["", "x", "5", 5, 2.5, None, [], {}, True, "none", "document"]
    names = ["query", "k", "budget_tokens", "expand", "cursor", "action", "text", "zzz"]
    for _ in range(2_000):
        arguments = {n: rng.choice(junk) for n in rng.sample(names, rng.randint(0, 5))}
        try:
            tool_arguments(arguments)
        except ValueError as exc:
            said = str(exc)
            assert "\n" not in said, said
            assert "Value error" not in said, said
