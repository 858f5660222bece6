"""Where a fair stage's messages come from: one at a time, from the tenant whose turn it is.

FastStream keeps the stage's subscriber (its parser, middlewares, metrics, traces and handler,
acked by hand as every stage is); only the source changes. Instead of FastStream's loop over
the stage's one durable consumer, which hands out the stream in order, each replica reads which
tenants' lanes hold work (:func:`kbus_contract.backlog.held_for`, every ``poll_s``),
asks :class:`~kbus_runtime.fair_share.FairShare` whose turn it is, and takes one message from
that lane's consumer, made when first needed and removed by the server once idle. A worker asks
for a message only when it is free, so nothing of one tenant queues inside a replica ahead of
another's; each message is charged its work (:mod:`kbus_contract.work`) from when it is fetched
until it is settled, and a tenant holds at most the stage's window of work in the replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kbus_contract.backlog import held_for
from kbus_contract.lanes import Lane
from kbus_contract.storage import lane_consumer
from kbus_contract.topology import StageConsumer, Topology
from kbus_contract.work import work_of
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.errors import APIError

from kbus_runtime.fair_share import FairShare, Turn

log = logging.getLogger("kbus")

#: One message if the lane has one now, else an answer that it has none (no waiting).
NEXT_NOW = b'{"batch":1,"no_wait":true}'
FETCH_TIMEOUT_S = 5.0
_NO_RESPONDERS = "503"
#: Marks a stray subject where the fair share names a tenant (no tenant id has a space): a
#: subject of the stage's channel that no tenant's lane takes, such as one a publisher without
#: kbus's permissions sent with a malformed tenant. It takes its turn like a tenant, and the
#: stage dead-letters what it holds.
_STRAY = "stray "
#: The server's error when a consumer of that name exists with another configuration.
_ALREADY_EXISTS = 10148


def _status(message: Msg) -> str:
    """The status a fetch was answered with instead of a message ("": a message): none waiting
    (404), the request expired (408), the consumer's limits or leader (409), or no such
    consumer (503)."""
    return (message.headers or {}).get("Status", "")


#: The tenants' lanes whose work waiting at the next stage is at their budget (their next
#: message here waits until it drains).
Full = Callable[[JetStreamContext], Awaitable[frozenset[tuple[str, Lane]]]]


def downstream_full(
    topology: Topology, stage: StageConsumer, budget: Callable[[str, str], int]
) -> Full | None:
    """What a stage feeds, read like its own lanes: the tenants' lanes that hold their budget
    (``budget(tenant, stream)``) of messages waiting in the next stage's stream. Each lane is
    held to it on its own, so a tenant's bulk backlog never holds up its interactive work."""
    fed = [s for s in topology.stages if s.channel in stage.feeds]
    if not fed:
        return None

    async def full(js: JetStreamContext) -> frozenset[tuple[str, Lane]]:
        held: dict[tuple[str, Lane, str], int] = {}
        for consumer in fed:
            for (tenant, lane), count in (await held_for(js, topology, consumer)).lanes.items():
                key = (tenant, lane, consumer.stream)
                held[key] = held.get(key, 0) + count
        return frozenset(
            (tenant, lane)
            for (tenant, lane, stream), n in held.items()
            if n >= budget(tenant, stream)
        )

    return full


@dataclass(eq=False)
class LanePuller:
    """One replica's source of a fair stage's messages."""

    connection: Callable[[], Client]
    topology: Topology
    stage: StageConsumer
    share: FairShare
    poll_s: float
    full: Full | None = None
    _news: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _made: set[str] = field(default_factory=set, init=False)
    _refused: set[str] = field(default_factory=set, init=False)

    async def watch(self, running: Callable[[], bool]) -> None:
        """Read what each tenant's lanes hold, every ``poll_s``, while ``running``."""
        js = self.connection().jetstream()
        while running():
            try:
                held = await held_for(js, self.topology, self.stage)
                blocked = await self.full(js) if self.full is not None else frozenset()
                lanes = {key: n for key, n in held.lanes.items() if key not in blocked}
                strays = {(_STRAY + subject, Lane.BULK): n for subject, n in held.strays.items()}
                self.share.observe({**lanes, **strays})
                self._news.set()
            except (NatsError, TimeoutError) as exc:
                log.debug("%s: could not read the tenants' work: %s", self.stage.stage, exc)
            await asyncio.sleep(self.poll_s)

    async def work(
        self,
        consume: Callable[[Msg], Awaitable[Any]],
        running: Callable[[], bool],
        stopping: asyncio.Event,
    ) -> None:
        """One worker: take the next message whose turn it is and handle it, until stopped.

        Each worker fetches through an inbox of its own: a message JetStream delivers carries
        its own subject, not the inbox's, so replies to several fetches on one subscription
        could not be told apart.
        """
        nc = self.connection()
        inbox = await nc.subscribe(nc.new_inbox())
        try:
            while running() and not stopping.is_set():
                taken = await self.next_message(inbox)
                if taken is None:
                    continue
                message, turn, work = taken
                try:
                    await consume(message)
                finally:
                    self.share.settled(turn, work)
        finally:
            with contextlib.suppress(NatsError):
                await inbox.unsubscribe()

    async def next_message(self, inbox: Subscription) -> tuple[Msg, Turn, float] | None:
        """The next message by turn, the turn and its work (None: nothing may be taken now;
        then after waiting for news)."""
        if inbox.pending_msgs:
            # Delivered for a fetch that had timed out: it is this worker's all the same.
            late = await inbox.next_msg()
            if _status(late):
                return None
            return self._charged(self._turn_of(late), late)
        turn = self.share.take()
        if turn is None:
            self._news.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._news.wait(), self.poll_s)
            return None
        message = await self._fetch(turn.tenant, turn.lane, inbox)
        if message is None:
            self.share.found_empty(turn)
            return None
        return self._charged(turn, message)

    def _charged(self, turn: Turn, message: Msg) -> tuple[Msg, Turn, float]:
        work = work_of(message.headers, message.data)
        self.share.fetched(turn, work)
        return message, turn, work

    def _turn_of(self, message: Msg) -> Turn:
        """The turn a message delivered late is charged to (nothing was charged for it)."""
        found = self.topology.tenant_lane(self.stage.channel, message.subject)
        tenant, lane = found if found is not None else (_STRAY + message.subject, Lane.BULK)
        return Turn(tenant, lane, 0.0)

    async def _fetch(self, tenant: str, lane: Lane, inbox: Subscription) -> Msg | None:
        name, filters = self._consumer(tenant, lane)
        if name not in self._made and not await self._make(name, filters):
            return None
        nc = self.connection()
        next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{self.stage.stream}.{name}"
        await nc.publish(next_subject, NEXT_NOW, reply=inbox.subject)
        try:
            reply = await inbox.next_msg(timeout=FETCH_TIMEOUT_S)
        except (NatsTimeoutError, TimeoutError):
            return None
        status = _status(reply)
        if status == _NO_RESPONDERS:
            self._made.discard(name)  # removed while idle: made again on its next turn
        return None if status else reply

    def _consumer(self, tenant: str, lane: Lane) -> tuple[str, list[str]]:
        """The name and filters of the consumer of a tenant's lane, or of a stray subject."""
        if tenant.startswith(_STRAY):
            subject = tenant.removeprefix(_STRAY)
            digest = hashlib.sha256(subject.encode()).hexdigest()[:16]
            return f"{self.stage.durable}_stray_{digest}", [subject]
        name = self.stage.lane_consumer(tenant, lane)
        return name, self.topology.lane_filters(self.stage.channel, tenant, lane)

    async def _make(self, name: str, filter_subjects: list[str]) -> bool:
        """Create a lane's consumer (as it is, if it exists); False: could not."""
        config = lane_consumer(
            name,
            filter_subjects,
            ack_wait_s=self.topology.ack_wait_s,
            max_deliver=self.topology.max_deliver,
            max_ack_pending=self.stage.tenant_in_flight,
        )
        try:
            await self.connection().jetstream().add_consumer(self.stage.stream, config)
        except APIError as exc:
            if exc.err_code != _ALREADY_EXISTS:
                self._could_not(name, exc)
                return False
        except (NatsError, TimeoutError) as exc:
            self._could_not(name, exc)
            return False
        self._made.add(name)
        return True

    def _could_not(self, name: str, exc: Exception) -> None:
        # Asked again at the lane's next turn (an election ends, a durable left from before
        # fair share is removed): said once per consumer, not at every turn.
        level = logging.DEBUG if name in self._refused else logging.WARNING
        self._refused.add(name)
        log.log(level, "%s: could not make consumer %s: %s", self.stage.stage, name, exc)


def pull_fairly(subscriber: Any, puller: LanePuller, workers: int, stopping: asyncio.Event) -> None:
    """Make a FastStream pull subscriber take its messages from ``puller`` with ``workers``
    at once, instead of from its durable consumer (which it then never creates).

    FastStream's subscriber creates its subscription in ``_create_subscription`` as it starts;
    that step starts the watch and the workers as the subscriber's own tasks instead, so
    FastStream stops them as it stops the subscriber (after the running messages finished).
    """

    def running() -> bool:
        return bool(subscriber.running)

    async def start() -> None:
        subscriber.add_task(puller.watch, func_args=(running,))
        for _ in range(workers):
            subscriber.add_task(puller.work, func_args=(subscriber.consume, running, stopping))

    subscriber._create_subscription = start
