"""The turn of each tenant (kbus_runtime.fair_share): in turn, by weight, interactive first, no
credit for waiting nothing."""

from __future__ import annotations

from collections import Counter

from kbus_contract.lanes import Lane
from kbus_runtime.fair_share import FairShare

B, NOW = Lane.BULK, Lane.INTERACTIVE


def _turns(share: FairShare, n: int) -> list[str]:
    taken = [share.take() for _ in range(n)]
    return [turn[0] for turn in taken if turn is not None]


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


def test_a_weight_gives_that_many_turns() -> None:
    share = FairShare({"gold": 3.0})
    share.observe({("gold", B): 1_000, ("plain", B): 1_000})
    assert Counter(_turns(share, 400)) == {"gold": 300, "plain": 100}


def test_a_tenant_s_interactive_lane_goes_before_its_bulk_lane() -> None:
    share = FairShare()
    share.observe({("a", B): 10, ("a", NOW): 2})
    assert [share.take() for _ in range(3)] == [("a", NOW), ("a", NOW), ("a", B)]


def test_an_empty_fetch_gives_the_turn_back_and_stops_asking_until_the_server_says_more() -> None:
    share = FairShare()
    share.observe({("a", B): 1, ("b", B): 5})
    assert share.take() == ("a", B)
    share.found_empty("a", B)  # its one message was in flight with another replica
    assert _turns(share, 10) == ["b"] * 5
    share.observe({("a", B): 1})
    assert share.take() == ("a", B)


def test_nothing_waiting_takes_nothing_and_idle_tenants_are_forgotten() -> None:
    share = FairShare()
    assert share.take() is None
    share.observe({("a", B): 1})
    assert share.take() == ("a", B)
    share.observe({})
    assert share.take() is None
    assert share.waiting() == {}
