"""A dead letter's message sent again, as it was (``kbus dlq replay``, the web console).

The message goes to the subject it was first sent on, where the credential may publish (its own
tenant's: the gate checks it again), naming the dead letter it replays: once it is stored, the
gate removes that letter (:data:`kbus_contract.intake.REPLAY_OF`). An operator's replay of a
letter no gate passes on (a stage's own message) removes it itself.
"""

from __future__ import annotations

from kbus_contract import ORIGINAL_LIMIT, DeadLetter
from kbus_contract.intake import REPLAY_OF
from kbus_contract.topology import Topology
from nats.aio.client import Client
from nats.js.errors import APIError

#: JetStream's error codes for a sequence the stream does not hold (no message there, or a
#: sequence it never had or already removed).
NO_MESSAGE = frozenset({10057, 10043})


class ReplayError(ValueError):
    """A dead letter that cannot be replayed as it was."""


async def replay_letter(
    nc: Client, topology: Topology, sequence: int, letter: DeadLetter, *, remove: bool = False
) -> None:
    """Send dead letter ``sequence``'s message again; with ``remove`` (an operator), remove the
    letter where the gate has not.

    Raises:
        ReplayError: the letter keeps only part of its message.
    """
    body = letter.original.encode("utf-8")
    if letter.original_size > ORIGINAL_LIMIT or len(body) != letter.original_size:
        raise ReplayError(
            f"dead letter {sequence} holds only part of its message "
            f"({letter.original_size} bytes): it cannot be replayed as it was"
        )
    js = nc.jetstream()
    headers = {"content-type": "application/json", REPLAY_OF: str(sequence)}
    await js.publish(topology.as_sent(letter.subject), body, headers=headers)
    if remove:
        try:
            await js.delete_msg(topology.dead_letter_stream.name, sequence)
        except APIError as exc:
            if exc.err_code not in NO_MESSAGE:
                raise
