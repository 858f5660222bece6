"""A dead letter its tenant replayed leaves the list (:data:`kbus_contract.intake.REPLAY_OF`).

A tenant's credential holds no JetStream API, so it cannot delete its dead letter after
replaying it; the gate does, once the replayed message is stored, and only where the header
names a dead letter of the sender's own tenant, of a library its credential reaches, whose
original is byte for byte the message just stored (as the gate stores it: a dead letter keeps
the stored form). Any other value removes nothing: the header
cannot reach another tenant's letters, nor a letter whose message was not sent again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kbus_contract import DeadLetter
from kbus_contract.intake import REPLAY_OF
from kbus_contract.tenancy import Identity
from kbus_contract.topology import Topology
from kbus_runtime.answering import Inbound
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError
from pydantic import ValidationError

log = logging.getLogger("kbus")


class Replays:
    """Removes the dead letters their tenants replayed."""

    def __init__(self, topology: Topology, js: Callable[[], JetStreamContext]) -> None:
        self.topology = topology
        self.js = js

    async def settle(self, inbound: Inbound, sent: Identity, stored_as: bytes) -> bool:
        """Remove the dead letter a message stored as ``stored_as`` replays, if it is the
        sender's to remove; whether one was removed."""
        value = next((v for k, v in inbound.headers.items() if k.lower() == REPLAY_OF.lower()), "")
        if not value.isdigit() or sent.tenant is None:
            return False
        stream, sequence = self.topology.dead_letter_stream.name, int(value)
        try:
            stored = await self.js().get_msg(stream, sequence)
            letter = DeadLetter.model_validate_json(stored.data or b"")
        except (NotFoundError, ValidationError):
            return False
        granted = sent.libraries()
        if (
            letter.tenant != sent.tenant
            or (granted is not None and letter.library not in granted)
            or letter.original.encode("utf-8") != stored_as
        ):
            return False
        try:
            await self.js().delete_msg(stream, sequence)
        except (NatsError, TimeoutError) as exc:  # stays listed; a replay again removes it
            log.warning("could not remove replayed dead letter %d: %s", sequence, exc)
            return False
        return True
