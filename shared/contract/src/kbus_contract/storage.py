"""How kbus's streams, buckets and consumers are stored: their JetStream configurations.

:class:`~kbus_contract.topology.Topology` names them; this module says how each kind keeps its
messages (file storage always, the replica count of the installation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DiscardPolicy,
    KeyValueConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

DAY = 24 * 60 * 60.0
#: How long a dead letter is kept; a dead-lettered document's claim-checked text as long.
DEAD_LETTER_AGE_S = 30 * DAY
#: A tenant's lane consumer nobody has pulled from for this long is removed by the server; the
#: tenant's next work makes it again (about a millisecond; what it held stays in the stream
#: meanwhile). Short, so that the consumers follow the tenants active now, not in the hour.
LANE_IDLE_S = 5 * 60.0
DEDUPE_WINDOW_S = 2 * 60.0


@dataclass(frozen=True)
class Stream:
    """One stream: its name, and the configuration kbus declares it with."""

    name: str
    config: StreamConfig

    @property
    def subjects(self) -> list[str]:
        return list(self.config.subjects or ())


def _declared(name: str, **config: Any) -> Stream:
    return Stream(name, StreamConfig(name=name, storage=StorageType.FILE, **config))


def work_stream(name: str, subjects: list[str], *, replicas: int, max_bytes: int) -> Stream:
    """A work queue: a message lives until a consumer acks it. With DiscardPolicy.NEW a full
    stream refuses the publish (the publisher sees an error) instead of evicting work."""
    return _declared(
        name,
        num_replicas=replicas,
        subjects=subjects,
        retention=RetentionPolicy.WORK_QUEUE,
        discard=DiscardPolicy.NEW,
        max_bytes=max_bytes,
        max_msgs=10_000_000,
        duplicate_window=DEDUPE_WINDOW_S,
    )


def receipts_stream(name: str, subjects: list[str], *, replicas: int, max_bytes: int) -> Stream:
    """Receipts for whoever listens: kept a week, the oldest dropped when full."""
    return _records(name, subjects, replicas, max_bytes, 7 * DAY, DiscardPolicy.OLD)


def dead_letter_stream(name: str, subjects: list[str], *, replicas: int, max_bytes: int) -> Stream:
    """Dead letters are the record of what failed: refuse new ones rather than drop old ones."""
    return _records(
        name, subjects, replicas, max_bytes, DEAD_LETTER_AGE_S, DiscardPolicy.NEW, dedupe=False
    )


def _records(
    name: str,
    subjects: list[str],
    replicas: int,
    max_bytes: int,
    max_age: float,
    discard: DiscardPolicy,
    dedupe: bool = True,
) -> Stream:
    """A log of records kept ``max_age`` seconds."""
    window = {"duplicate_window": DEDUPE_WINDOW_S} if dedupe else {}
    return _declared(
        name,
        num_replicas=replicas,
        subjects=subjects,
        retention=RetentionPolicy.LIMITS,
        max_age=max_age,
        max_bytes=max_bytes,
        discard=discard,
        **window,
    )


def advisories_stream(name: str, subjects: list[str], *, replicas: int, max_bytes: int) -> Stream:
    """The server publishes each advisory once, whether or not anyone listens: a stream keeps it
    until the dead-letterer has handled it, even if that was down at the time."""
    return _declared(
        name,
        num_replicas=replicas,
        subjects=subjects,
        retention=RetentionPolicy.WORK_QUEUE,
        max_age=30 * DAY,
        discard=DiscardPolicy.NEW,
        max_bytes=min(max_bytes, 64 * 1024**2),
    )


def bodies_stream(name: str, subjects: list[str], *, replicas: int, max_bytes: int) -> Stream:
    """The store of large texts: parts wait until the message naming them is indexed (then
    they are removed); a dead-lettered document's stay as long as its dead letter, so that its
    replay finds them, and the age limit bounds what a crash leaves. A full store refuses a new
    part rather than drop a stored one. Any replica answers a read (parts never change)."""
    return _declared(
        name,
        num_replicas=replicas,
        subjects=subjects,
        retention=RetentionPolicy.LIMITS,
        max_age=DEAD_LETTER_AGE_S,
        discard=DiscardPolicy.NEW,
        max_bytes=max_bytes,
        duplicate_window=DEDUPE_WINDOW_S,
        allow_direct=True,
    )


def bucket(
    name: str,
    description: str,
    *,
    replicas: int,
    max_bytes: int,
    direct: bool = False,
    max_age_s: float | None = None,
) -> KeyValueConfig:
    """A key-value bucket (file storage, one value per key).

    ``direct``: any replica answers reads, without the JetStream API, and many keys can be
    read in one request. Only for a bucket where a stale value is harmless: a replica may lag.
    ``max_age_s``: a value is forgotten this long after it was written.
    """
    return KeyValueConfig(
        bucket=name,
        history=1,
        storage=StorageType.FILE,
        replicas=replicas,
        max_bytes=max_bytes,
        description=description,
        direct=direct,
        ttl=max_age_s,
    )


def work_consumer(
    durable: str, *, ack_wait_s: float = 60.0, max_deliver: int = 10
) -> ConsumerConfig:
    """The durable pull consumer of one pipeline stage; replicas bind to the same name."""
    return ConsumerConfig(
        durable_name=durable,
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=ack_wait_s,
        max_deliver=max_deliver,
        max_ack_pending=1_000,
    )


def lane_consumer(
    name: str,
    filter_subjects: list[str],
    *,
    ack_wait_s: float = 60.0,
    max_deliver: int = 10,
    max_ack_pending: int = 1_000,
    idle_s: float = LANE_IDLE_S,
) -> ConsumerConfig:
    """The consumer of one tenant's lane at one stage (fair share): what a stage's durable is,
    for that tenant's lane only, removed when idle; every replica of the stage pulls from it.
    ``max_ack_pending`` bounds the tenant's messages in flight at the stage, over every replica
    (the server hands out no more)."""
    return ConsumerConfig(
        name=name,
        durable_name=name,
        filter_subject=filter_subjects[0] if len(filter_subjects) == 1 else None,
        filter_subjects=filter_subjects if len(filter_subjects) > 1 else None,
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=ack_wait_s,
        max_deliver=max_deliver,
        max_ack_pending=max_ack_pending,
        inactive_threshold=idle_s,
    )
