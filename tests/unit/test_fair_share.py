"""The turn of each tenant (kbus_runtime.fair_share): in turn, by weight, charged in work,
interactive first, no credit for waiting nothing, at most a window of work held at once."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from kbus_contract.lanes import Lane
from kbus_runtime.fair_share import FairShare, Stride, Turn

B, NOW = Lane.BULK, Lane.INTERACTIVE


def _turns(share: FairShare, n: int, cost: float = 1.0) -> list[str]:
    """``n`` turns taken, each message costing ``cost`` and settled at once."""
    names = []
    for _ in range(n):
        turn = share.take()
        if turn is None:
            break
        share.fetched(turn, cost)
        share.settled(turn, cost)
        names.append(turn.tenant)
    return names


def test_tenants_with_work_waiting_are_served_in_turn() -> None:
    share = FairShare()
    share.observe({("a", B): 100, ("b", B): 2, ("c", B): 1})
    assert sorted(_turns(share, 3)) == ["a", "b", "c"]
    assert sorted(_turns(share, 2)) == ["a", "b"]
    assert _turns(share, 3) == ["a", "a", "a"]


def test_a_tenant_that_starts_waiting_joins_at_once_but_earns_no_credit() -> None:
    share = FairShare()
    share.observe({("a", B): 1_000})
    _turns(share, 500)
    share.observe({("a", B): 500, ("b", B): 50})
    # b is served next and then every other time, not 500 times in a row.
    assert _turns(share, 6) == ["b", "a", "b", "a", "b", "a"]


def test_a_weight_gives_that_much_work() -> None:
    share = FairShare({"gold": 3.0})
    share.observe({("gold", B): 1_000, ("plain", B): 1_000})
    assert Counter(_turns(share, 400)) == {"gold": 300, "plain": 100}


def test_turns_are_charged_in_work_not_in_messages() -> None:
    """A tenant whose messages hold 64 chunks gets one turn for another's 64 of one chunk."""
    share = FairShare()
    share.observe({("large", B): 1_000, ("small", B): 1_000})
    work: Counter[str] = Counter()
    for _ in range(650):
        turn = share.take()
        assert turn is not None
        cost = 64.0 if turn.tenant == "large" else 1.0
        share.fetched(turn, cost)
        share.settled(turn, cost)
        work[turn.tenant] += int(cost)
    assert abs(work["large"] - work["small"]) <= 64, work


def test_a_tenant_s_interactive_lane_goes_before_its_bulk_lane() -> None:
    share = FairShare()
    share.observe({("a", B): 10, ("a", NOW): 2})
    taken = [share.take() for _ in range(3)]
    assert [(t.tenant, t.lane) for t in taken if t] == [("a", NOW), ("a", NOW), ("a", B)]


def test_an_empty_fetch_gives_the_turn_back_and_stops_asking_until_the_server_says_more() -> None:
    share = FairShare()
    share.observe({("a", B): 1, ("b", B): 5})
    turn = share.take()
    assert turn == Turn("a", B, 1.0)
    share.found_empty(turn)  # its one message was in flight with another replica
    assert share.held("a") == 0
    assert _turns(share, 10) == ["b"] * 5
    share.observe({("a", B): 1})
    assert share.take() == Turn("a", B, 1.0)


def test_a_tenant_holds_at_most_its_window_of_work_and_one_message_past_it() -> None:
    share = FairShare(window=128)
    share.observe({("a", B): 100})
    for _ in range(2):  # 100 held, under the window: one more (then 200, past it)
        turn = share.take()
        assert turn is not None
        share.fetched(turn, 100.0)
    assert share.held("a") == 200
    assert share.take() is None
    share.observe({("a", B): 98, ("b", B): 1})
    assert share.take() == Turn("b", B, 1.0)  # another tenant's work is taken meanwhile
    share.settled(Turn("a", B, 100.0), 100.0)
    assert share.held("a") == 100
    assert share.take() is not None


def test_a_tenant_s_interactive_work_is_taken_while_its_bulk_work_fills_its_window() -> None:
    share = FairShare(window=64)
    share.observe({("a", B): 10})
    turn = share.take()
    assert turn is not None
    share.fetched(turn, 64.0)
    assert share.take() is None
    share.observe({("a", B): 9, ("a", NOW): 1})
    assert share.take() == Turn("a", NOW, 64.0)


def test_a_message_larger_than_the_window_is_taken_alone() -> None:
    share = FairShare(window=64)
    share.observe({("a", B): 3})
    turn = share.take()
    assert turn is not None
    share.fetched(turn, 2_000.0)
    assert share.take() is None
    share.settled(turn, 2_000.0)
    assert share.take() is not None


def test_nothing_waiting_takes_nothing_and_idle_tenants_are_forgotten() -> None:
    share = FairShare()
    assert share.take() is None
    share.observe({("a", B): 1})
    turn = share.take()
    assert turn == Turn("a", B, 1.0)
    share.fetched(turn, 1.0)
    share.settled(turn, 1.0)
    share.observe({})
    assert share.take() is None
    assert share.waiting() == {}


def test_what_is_kept_follows_the_tenants_waiting_not_every_tenant_seen() -> None:
    share = FairShare()
    for n in range(5_000):
        share.observe({(f"t{n}", B): 1, ("steady", B): 1_000})
        assert _turns(share, 2)
    share.observe({("steady", B): 1_000})
    _turns(share, 2)
    assert share.stride.known() <= 3


def _random_stage(rng: random.Random) -> tuple[dict[str, float], dict[str, list[int]]]:
    """Tenants with random weights, each publishing messages of 1 to 500 chunks (each tenant its
    own spread: some only small ones, some only large)."""
    weights, messages = {}, {}
    for n in range(rng.randint(2, 6)):
        name = f"t{n}"
        weights[name] = float(rng.choice([1, 1, 2, 3, 4]))
        low = rng.randint(1, 500)
        high = rng.randint(low, 500)
        messages[name] = [rng.randint(low, high) for _ in range(4_000)]
    return weights, messages


@pytest.mark.parametrize("seed", range(40))
def test_each_tenant_gets_its_weight_s_share_of_the_work_whatever_its_messages(seed: int) -> None:
    """Over a window in which every tenant has work waiting, each one's share of the work done
    is within 20 % of its weight's share, however large or small its messages."""
    rng = random.Random(seed)
    weights, messages = _random_stage(rng)
    share = FairShare(weights, window=256)
    done: Counter[str] = Counter()
    position = dict.fromkeys(weights, 0)
    while min(done.values(), default=0) < 40_000 and all(
        p < len(m) - 1 for p, m in zip(position.values(), messages.values(), strict=True)
    ):
        share.observe({(t, B): len(messages[t]) - position[t] for t in weights})
        turn = share.take()
        assert turn is not None
        cost = messages[turn.tenant][position[turn.tenant]]
        position[turn.tenant] += 1
        share.fetched(turn, cost)
        share.settled(turn, cost)
        done[turn.tenant] += cost
    total, weight = sum(done.values()), sum(weights.values())
    for tenant, w in weights.items():
        expected = w / weight
        assert abs(done[tenant] / total - expected) <= 0.2 * expected, (seed, weights, done)


@pytest.mark.parametrize("seed", range(40))
def test_a_one_chunk_message_waits_at_most_one_turn_of_each_other_tenant(seed: int) -> None:
    """A tenant that starts waiting with one chunk is served before any other tenant gets a
    second turn: its wait is at most one turn (one message, at most a quantum of work once the
    stage cuts large work) of each tenant already waiting."""
    rng = random.Random(seed)
    weights, messages = _random_stage(rng)
    share = FairShare(weights)
    share.observe({(t, B): len(m) for t, m in messages.items()})
    for _ in range(rng.randint(0, 300)):
        turn = share.take()
        assert turn is not None
        cost = rng.choice(messages[turn.tenant])
        share.fetched(turn, cost)
        share.settled(turn, cost)
    share.observe({**{(t, B): len(m) for t, m in messages.items()}, ("probe", B): 1})
    before: Counter[str] = Counter()
    while (turn := share.take()) is not None and turn.tenant != "probe":
        before[turn.tenant] += 1
        cost = rng.choice(messages[turn.tenant])
        share.fetched(turn, cost)
        share.settled(turn, cost)
    assert turn is not None
    assert turn.tenant == "probe"
    assert all(n <= 1 for n in before.values()), before


def test_stride_sweeps_tenants_behind_the_clock_only() -> None:
    stride = Stride()
    stride.join("a")
    stride.charge("a", 100)
    stride.join("b")
    stride.sweep([])
    # a was served much: it keeps its pass (it must not come back with a clean slate).
    assert stride.pass_of("a") == 100
    assert stride.known() == 1
