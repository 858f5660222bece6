"""The list of every permission in docs/security.md is the one the code grants."""

from __future__ import annotations

from pathlib import Path

from kbus_dev import docblocks
from kbus_dev.permissions_doc import BLOCK, PAGE, listing

ROOT = Path(__file__).resolve().parents[2]


def test_the_permissions_page_lists_what_the_code_grants() -> None:
    assert docblocks.current(ROOT / PAGE, BLOCK) == listing(), "run `make docs`"


def test_a_tenant_account_holds_no_jetstream_api() -> None:
    tenant_part = listing().split("**kbus's account")[0]
    assert "$JS." not in tenant_part
    # Large texts go through the gate, in parts: no store of its own, no object store subjects.
    assert "service `document.body.acme.*`" in tenant_part
    assert "$O." not in listing()
