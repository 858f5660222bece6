"""Bytes kept by model and text in a JetStream key-value bucket, read and written in bulk.

A bucket maps ``sha256(model, text)`` to what a model made of the text: the embedder's vectors
(the embedding cache) and its token states (the reranker's store). Either is an optimisation and
never a reason to fail: if the bucket cannot be opened or read, the caller works as if it were
empty.

Such traffic is large, so it takes few round trips: a call's keys are read with one batched
direct get (the bucket allows direct reads) and its new values are written without waiting for
each acknowledgement, only for the last one, whose error (a full bucket, say) is logged. Per
key, a read and an acknowledged write each took a round trip, most of a document's requests
(docs/tuning.md, "The embedding cache").
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import logging
from collections.abc import Sequence

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import Header, KeyValueConfig
from nats.js.kv import KeyValue

from kbus_runtime.declaring import open_bucket

log = logging.getLogger("kbus.cache")

#: The server answers at most this many subjects in one batched get.
MAX_SUBJECTS = 1024
#: How long a batched get may take before its keys count as missing.
READ_TIMEOUT_S = 5.0
_END_OF_BATCH = ("204", "404")  # the batch's last message, and "no key was found"


def cache_key(model: str, text: str) -> str:
    """The bucket key of what ``model`` made of ``text``."""
    return hashlib.sha256(f"{model}\x1f{text}".encode()).hexdigest()


class BatchReads:
    """Direct gets of many keys in one request, answered on one subscription.

    The server sends each key's latest value as a message of its own, then one message with a
    status (204, end of batch; 404, none found). A key it does not hold is not answered.
    """

    def __init__(self, nc: Client, stream: str, timeout_s: float = READ_TIMEOUT_S) -> None:
        self._nc = nc
        self._api = f"$JS.API.DIRECT.GET.{stream}"
        self._timeout_s = timeout_s
        self._tokens = itertools.count()
        self._waiting: dict[str, tuple[dict[str, bytes], asyncio.Future[None]]] = {}
        self._base = ""
        self._sub: Subscription | None = None

    async def start(self) -> None:
        self._base = self._nc.new_inbox()
        self._sub = await self._nc.subscribe(f"{self._base}.*", cb=self._on_reply)

    async def last_values(self, subjects: Sequence[str]) -> dict[str, bytes]:
        """The latest value of each subject that has one."""
        found: dict[str, bytes] = {}
        for begin in range(0, len(subjects), MAX_SUBJECTS):
            found.update(await self._request(subjects[begin : begin + MAX_SUBJECTS]))
        return found

    async def _request(self, subjects: Sequence[str]) -> dict[str, bytes]:
        token = str(next(self._tokens))
        found: dict[str, bytes] = {}
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting[token] = (found, done)
        try:
            payload = json.dumps({"multi_last": list(subjects)}).encode()
            await self._nc.publish(self._api, payload, reply=f"{self._base}.{token}")
            await asyncio.wait_for(done, self._timeout_s)
        finally:
            self._waiting.pop(token, None)
        return found

    async def _on_reply(self, msg: Msg) -> None:
        waiting = self._waiting.get(msg.subject[len(self._base) + 1 :])
        if waiting is None:
            return  # the answer to a request that gave up
        found, done = waiting
        headers = msg.headers or {}
        status = headers.get(Header.STATUS)
        if status is None:
            found[headers.get("Nats-Subject", "")] = msg.data
        elif not done.done():
            if status in _END_OF_BATCH:
                done.set_result(None)
            else:
                description = headers.get(Header.DESCRIPTION, "")
                done.set_exception(RuntimeError(f"batched get: {status} {description}".strip()))


class KeyedCache:
    """Values by ``cache_key(model, text)`` in one bucket."""

    def __init__(self, config: KeyValueConfig, what: str) -> None:
        self.config = config
        self.what = what
        self._kv: KeyValue | None = None
        self._nc: Client | None = None
        self._reads: BatchReads | None = None

    @property
    def is_open(self) -> bool:
        return self._kv is not None

    async def open(self, nc: Client, *, create: bool, quiet: bool = False) -> None:
        """Open (or create) the bucket; without it the cache stays off (said unless ``quiet``)."""
        try:
            self._kv = await open_bucket(nc.jetstream(), self.config, create=create)
            reads = BatchReads(nc, f"KV_{self.config.bucket}")
            await reads.start()
            self._reads = reads
        except Exception as exc:
            log.log(
                logging.DEBUG if quiet else logging.WARNING,
                "%s off: bucket %s: %s",
                self.what,
                self.config.bucket,
                exc,
            )
            self._kv = None
            return
        self._nc = nc

    def _subject(self, key: str) -> str:
        return f"$KV.{self.config.bucket}.{key}"

    async def get(self, model: str, texts: Sequence[str]) -> list[bytes | None]:
        """The value kept for each text (None: none, or the bucket could not be read)."""
        if self._reads is None or self._kv is None:
            return [None] * len(texts)
        keys = [cache_key(model, t) for t in texts]
        try:
            found = await self._reads.last_values([self._subject(k) for k in dict.fromkeys(keys)])
        except Exception as exc:
            log.warning("%s: read failed: %s", self.what, exc)
            return [None] * len(texts)
        return [found.get(self._subject(k)) for k in keys]

    async def put(self, model: str, texts: Sequence[str], values: Sequence[bytes]) -> None:
        """Keep one value per text (best effort).

        Every write but the last is sent without waiting for its acknowledgement: one
        connection's writes to the bucket are stored in order, and a full bucket refuses the
        last one too, so its answer says whether writing has stopped.
        """
        kv, nc = self._kv, self._nc
        if kv is None or nc is None or not texts:
            return
        keys = [cache_key(model, t) for t in texts]
        try:
            for key, value in zip(keys[:-1], values[:-1], strict=True):
                await nc.publish(self._subject(key), value)
            await kv.put(keys[-1], values[-1])
        except Exception as exc:
            log.warning("%s: writing %d values failed: %s", self.what, len(texts), exc)
