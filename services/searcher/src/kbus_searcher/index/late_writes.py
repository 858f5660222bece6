"""Writes the store takes after its client gave up (a batch sent while a Weaviate node was
down, or by a replica SIGKILLed mid-write): the server goes on and the objects may land after a
later delivery of the same message undid the publish. A publish undone on a redelivered
message is therefore undone once more, :data:`LATE_WRITE_S` later, before it is settled."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from kbus_contract import EmbeddingsReady
from kbus_contract.errors import ErrorCode, TransientError

#: Seconds a store call its client gave up on may still take effect in Weaviate (the server
#: goes on with a write after the client's deadline): a publish undone on a delivery after a
#: failed one is undone once more this much later, and only then settled.
LATE_WRITE_S = 60.0


#: Publishes held for their second undo, at most (the oldest forgotten: undone once more).
MAX_CONFIRMING = 10_000


def _publish_key(ready: EmbeddingsReady) -> tuple[str, str, str, int, str]:
    doc = ready.document
    return doc.tenant, doc.library, doc.document_id, doc.sequence, doc.version


class OvertakenError(Exception):
    """The outcome of a publish this delivery undid instead of indexing (a later publish or a
    deletion won): settled, unless an earlier delivery's write may still land."""


@dataclass(eq=False)
class LateWrites:
    """The publishes undone once on a redelivery, held for their second undo."""

    held: OrderedDict[tuple[str, str, str, int, str], None] = field(default_factory=OrderedDict)

    def settle(self, ready: EmbeddingsReady) -> None:
        """Settle a publish undone on a redelivered message, or hold it: ``TransientError``
        delivers it again :data:`LATE_WRITE_S` later (undone again then, and settled)."""
        key = _publish_key(ready)
        if key in self.held:
            del self.held[key]
            return  # undone again after the pause: nothing late can come any more
        self.held[key] = None
        while len(self.held) > MAX_CONFIRMING:
            self.held.popitem(last=False)
        raise TransientError(
            "an earlier delivery's write may still land: undone again later",
            code=ErrorCode.STORE_WRITE_FAILED,
            retry_after_s=LATE_WRITE_S,
        )
