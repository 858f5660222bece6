"""The cursor of a context: what a search has given so far, so that the next page of the same
search gives none of it again. It is the caller's own record, not a secret: it can only hold
back text from the caller's own answer, never widen what a search reads."""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from typing import Any

from kbus_contract import SearchRequest
from kbus_contract.errors import ErrorCode, PermanentError

from kbus_searcher.search.packing import DocKey, Interval, merged

_VERSION = 1
#: The most a cursor may inflate to (a compressed bomb is refused).
_MOST_BYTES = 1 << 20
#: The most spans a cursor may hold: each hit of a page is checked against them.
MOST_SPANS = 4_096


def fingerprint(req: SearchRequest) -> str:
    """What makes two requests the same search (the budget, k and the cursor may differ)."""
    same = req.model_dump(
        mode="json",
        include={
            "tenant",
            "libraries",
            "query",
            "search_type",
            "alpha",
            "filters",
            "exclude_documents",
            "expand",
            "transformer",
            "rewrite",
        },
    )
    return hashlib.sha256(json.dumps(same, sort_keys=True).encode()).hexdigest()[:16]


def encode(req: SearchRequest, taken: dict[DocKey, list[Interval]]) -> str:
    """The cursor after a page that leaves ``taken`` given."""
    held = [[*key, merged(spans)] for key, spans in sorted(taken.items()) if spans]
    raw = json.dumps({"v": _VERSION, "f": fingerprint(req), "t": held}, separators=(",", ":"))
    return base64.urlsafe_b64encode(zlib.compress(raw.encode(), 9)).decode().rstrip("=")


def decode(req: SearchRequest) -> dict[DocKey, list[Interval]]:
    """What the request's cursor says was given (nothing without a cursor).

    Raises:
        PermanentError: ``bad_cursor``, when it is not one kbus wrote or belongs to another
            search.
    """
    if req.cursor is None:
        return {}
    try:
        padded = req.cursor + "=" * (-len(req.cursor) % 4)
        inflating = zlib.decompressobj()
        data = inflating.decompress(base64.urlsafe_b64decode(padded), _MOST_BYTES)
        if inflating.unconsumed_tail:
            raise ValueError("the cursor inflates past its limit")
        raw: Any = json.loads(data)
        taken = {
            (str(lib), str(doc), str(ver)): [(int(a), int(b)) for a, b in spans]
            for lib, doc, ver, spans in raw["t"]
        }
        if sum(len(spans) for spans in taken.values()) > MOST_SPANS:
            raise ValueError("the cursor holds too many spans")
        same = raw["v"] == _VERSION and raw["f"] == fingerprint(req)
    except (ValueError, TypeError, KeyError, zlib.error) as exc:
        raise PermanentError("the cursor is not one kbus gave", code=ErrorCode.BAD_CURSOR) from exc
    if not same:
        raise PermanentError(
            "the cursor belongs to another search: give it with the same query, libraries, "
            "filters and expand",
            code=ErrorCode.BAD_CURSOR,
        )
    return taken
