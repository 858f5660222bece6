"""Syncs, as logic: what a list and the indexed documents make a sync do, lists by claim check,
lists kept in parts, and a page of versions never splitting a document."""

from __future__ import annotations

import pytest
from kbus_contract import DocumentAdded, LibrarySync, SyncEntry
from kbus_contract.errors import PermanentError
from kbus_searcher.index.reconciling import parse_listing, plan_sync
from kbus_searcher.state.syncmarks import PART_BYTES, mark_key, parts
from kbus_searcher.store.queries import newest
from pydantic import ValidationError

S = 100  # the sync's stream sequence


def test_a_sync_deletes_the_unlisted_published_before_it_and_waits_for_the_rest() -> None:
    listed = {"same": "v1", "edited": "v2", "new": "v1"}
    indexed = {
        "same": ("v1", 10),
        "edited": ("v1", 11),
        "gone": ("v1", 12),
        "after": ("v1", S + 5),  # published after the sync: stays, listed or not
    }
    plan = plan_sync(listed, indexed, S)
    assert plan.delete == ["gone"]
    assert plan.unchanged == 1
    assert plan.pending == {"edited": ("v2", True), "new": ("v1", False)}


def test_a_claim_checked_list_is_read_line_by_line_and_refused_when_ambiguous() -> None:
    lines = b'{"document_id": "a", "version": "1"}\n\n{"document_id": "b", "version": "2"}\n'
    assert parse_listing(lines) == {"a": "1", "b": "2"}
    with pytest.raises(PermanentError, match="line 2") as bad:
        parse_listing(b'{"document_id": "a", "version": "1"}\n{"document_id": "a b"}\n')
    assert bad.value.code == "bad_listing"
    with pytest.raises(PermanentError, match="twice"):
        parse_listing(
            b'{"document_id": "a", "version": "1"}\n{"document_id": "a", "version": "2"}\n'
        )


def test_a_sync_carries_its_list_one_way() -> None:
    entry = SyncEntry(document_id="a", version="1")
    LibrarySync(tenant="t", library="l", documents=(entry,))
    LibrarySync(tenant="t", library="l", documents=())  # an empty source
    with pytest.raises(ValidationError, match="not both"):
        LibrarySync(tenant="t", library="l")


def test_a_list_is_kept_in_parts_cut_at_line_ends() -> None:
    ids = [f"doc-{i:06d}-{'x' * 40}" for i in range(20_000)]
    cut = parts(reversed(ids))
    assert len(cut) > 1
    assert all(len(p) <= PART_BYTES and p.endswith(b"\n") for p in cut)
    assert b"".join(cut).decode().splitlines() == sorted(ids)
    assert parts([]) == [b""]
    assert mark_key("acme", "hr", None).endswith(".s._library")
    assert mark_key("acme", "hr", "wiki") != mark_key("acme", "hr", None)


def test_a_full_page_of_versions_leaves_its_last_document_to_the_next() -> None:
    rows = [("a", "v1", 1), ("b", "v1", 2), ("b", "v2", 9), ("c", "v1", 3)]
    found, after = newest(rows, full=True)
    assert found == {"a": ("v1", 1), "b": ("v2", 9)}
    assert after == "b"
    found, after = newest(rows, full=False)
    assert found["c"] == ("v1", 3)
    assert after is None
    only = [("a", "v1", 1), ("a", "v2", 2)]
    assert newest(only, full=True) == ({"a": ("v2", 2)}, "a")


def test_who_owns_and_who_reads_a_document_is_part_of_its_version() -> None:
    base = {"tenant": "t", "library": "l", "document_id": "d", "title": "T", "text": "x"}
    plain = DocumentAdded(**base)
    owned = DocumentAdded(**base, source="wiki")
    held = DocumentAdded(**base, access=("group:hr", "alice@example.com"))
    reordered = DocumentAdded(**base, access=("alice@example.com", "group:hr", "group:hr"))
    versions = {d.effective_version() for d in (plain, owned, held)}
    assert len(versions) == 3
    assert held.effective_version() == reordered.effective_version()
    assert plain.readers() == ("*",)
    assert held.readers() == ("alice@example.com", "group:hr")
    for bad in (("*",), ("two words",), ("a,b",)):
        with pytest.raises(ValidationError):
            DocumentAdded(**base, access=bad)
