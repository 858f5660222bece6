"""The ``Nats-Msg-Id`` of each publish: safe to re-send, impossible for anyone else to take.

JetStream drops a second message with an id its stream already holds (for two minutes), over
the whole stream, whoever sent it. An id anyone could compute (the document and a hash of its
content) let another tenant publish it first, on its own subject, and have this publish
dropped as a duplicate. So the id is a random one: the same for every re-send of one publish
(a timed-out publish may have been stored), and for an identical publish of the same document
right after this client's last one (which would change nothing), new otherwise: after a
change, after the document (or its library or tenant) was deleted, or for a page fetched again.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from kbus_contract import DocumentAdded
from kbus_contract.storage import DEDUPE_WINDOW_S

Key = tuple[str, str, str]


@dataclass
class _Last:
    digest: str
    msg_id: str
    at: float


@dataclass
class MessageIds:
    """The ids this client gave its last publish of each document, while JetStream keeps them."""

    _last: dict[Key, _Last] = field(default_factory=dict)

    def for_publish(self, doc: DocumentAdded) -> str:
        """The id of this publish of ``doc``."""
        now = time.monotonic()
        self._forget_older(now - DEDUPE_WINDOW_S)
        key = (doc.tenant, doc.library, doc.document_id)
        digest = doc.message_id()
        last = self._last.get(key)
        if doc.url is None and last is not None and last.digest == digest:
            return last.msg_id
        msg_id = uuid.uuid4().hex
        self._last[key] = _Last(digest, msg_id, now)
        return msg_id

    def deleted(self, tenant: str, library: str | None, document_id: str | None) -> None:
        """A deletion: the next publish of anything it removed is new, even if unchanged."""
        for key in list(self._last):
            if key[0] == tenant and library in (None, key[1]) and document_id in (None, key[2]):
                del self._last[key]

    def _forget_older(self, horizon: float) -> None:
        for key in [k for k, last in self._last.items() if last.at < horizon]:
            del self._last[key]
