"""Any file name becomes a document id, and two names never share one."""

from __future__ import annotations

import random
import re

from kbus_contract import DocumentAdded
from kbus_contract.identifiers import DOCUMENT_ID_PATTERN, document_id_of
from kbus_contract.wire import describe_validation_error
from pydantic import ValidationError

ALPHABET = "aZ09_.-~ /#@+=:,*>é漢\t%~~__--"


def _decode(document_id: str) -> str:
    """The name an id was made from (the inverse the docs describe)."""
    if "~" not in document_id:
        return document_id
    raw, i = bytearray(), 1 if document_id.startswith("_") else 0
    while i < len(document_id):
        if document_id.startswith("~~", i):
            raw += b"~"
            i += 2
        elif document_id[i] == "~":
            raw.append(int(document_id[i + 1 : i + 3], 16))
            i += 3
        else:
            raw += document_id[i].encode()
            i += 1
    return raw.decode("utf-8")


def test_every_name_maps_to_a_valid_id_that_gives_the_name_back() -> None:
    rng = random.Random(59)
    names = {"Meeting notes.md", "-x.md", "~a", "_~a", "a~b", "_~7Ea", "_~~a", " x", "_ x"}
    names |= {"".join(rng.choices(ALPHABET, k=rng.randint(1, 12))) for _ in range(5_000)}
    ids: dict[str, str] = {}
    for name in names:
        made = document_id_of(name)
        assert re.match(DOCUMENT_ID_PATTERN, made), (name, made)
        assert _decode(made) == name, (name, made)
        assert ids.setdefault(made, name) == name, f"{name!r} and {ids[made]!r} share {made}"


def test_a_name_that_is_already_an_id_keeps_it() -> None:
    for name in ("guides/vpn.md", "_index.md", "a-b_c.d:e@f+g=h#i"):
        assert document_id_of(name) == name


def test_an_invalid_id_is_explained_in_words() -> None:
    try:
        DocumentAdded(tenant="t", library="l", document_id="Meeting notes.md", title="", text="x")
    except ValidationError as exc:
        said = describe_validation_error(exc)
    assert said.startswith("document_id: must be 1 to 256 letters"), said
    assert "pattern" not in said
    assert "Value error" not in said
