"""The generator's work: each chunk's matching texts, written by a chat model or read from the
cache, then the chunks passed on to be embedded.

Generation is the slowest work in kbus (seconds per chunk on a small local model), so it runs as
its own stage, scaled on its own backlog, and only for libraries whose profile asks for it. What
was generated is kept by model, request and chunk text (:mod:`kbus_runtime.keyed_cache`): a
redelivery, a restart or a re-publish of unchanged text never generates again.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping

from faststream.nats.message import NatsMessage
from kbus_contract import ChatState, ChunksReady, Matching
from kbus_contract.lanes import Lane
from kbus_contract.work import chunks_work
from kbus_runtime.answering import Inbound
from kbus_runtime.chat import ChatModel, state_of
from kbus_runtime.fair_share import FairGate
from kbus_runtime.keyed_cache import KeyedCache
from kbus_runtime.stage import Stage
from nats.js.api import KeyValueConfig
from prometheus_client import CollectorRegistry, Counter, Histogram

from kbus_generator.prompts import Ask, ask_for, parsed


class GeneratedCache(KeyedCache):
    """Generated matching texts by model and what was asked (the prompt with the chunk)."""

    def __init__(self, config: KeyValueConfig) -> None:
        super().__init__(config, "generated texts")

    async def get_many(self, model: str, asks: list[Ask]) -> list[tuple[str, ...] | None]:
        found = await self.get(model, [_key(a) for a in asks])
        return [tuple(json.loads(v)) if v else None for v in found]

    async def put_many(self, model: str, asks: list[Ask], texts: list[tuple[str, ...]]) -> None:
        await self.put(model, [_key(a) for a in asks], [json.dumps(t).encode() for t in texts])


def _key(ask: Ask) -> str:
    return f"{ask.system}\x1f{ask.message}\x1f{ask.max_tokens}"


class Generator:
    """Writes the matching texts of each ``chunks.generate`` message."""

    def __init__(
        self,
        stage: Stage,
        chat: ChatModel,
        registry: CollectorRegistry,
        cache: GeneratedCache | None = None,
        calls: int = 2,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        self.stage = stage
        self.chat = chat
        self.cache = cache
        #: The model's calls, given to the tenants in turn (one of a tenant's many chunks
        #: waits for another tenant's one at most).
        self._calls = FairGate(calls, weights)
        self.chunks = Counter(
            "kbus_generator_chunks",
            "Chunks given matching texts (generated: by a model call; cached: read back)",
            ["source"],
            registry=registry,
        )
        self.seconds = Histogram(
            "kbus_generator_call_seconds",
            "Time of one model call",
            registry=registry,
            buckets=(0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64),
        )

    async def state(self, _: Inbound) -> ChatState:
        """Whether the chat model answers now (``kb.chat.generator``)."""
        return await state_of("generator", self.chat, "")

    async def handle(self, message: NatsMessage) -> None:
        """Settle one ``chunks.generate`` message."""
        await self.stage.settle(message, ChunksReady, self.generate)

    async def generate(self, ready: ChunksReady) -> None:
        """Give every chunk its matching texts and publish them on ``chunks.ready``."""
        matching = ready.generate or Matching()
        doc = ready.document
        if not await self.stage.wanted(doc.tenant, doc.library, doc.document_id, doc.sequence):
            return
        texts = (
            await self.texts(
                matching,
                [c.text for c in ready.chunks],
                doc.tenant,
                urgent=doc.lane is Lane.INTERACTIVE,
            )
            if matching.generated
            else None
        )
        chunks = tuple(
            c.model_copy(update={"matching": texts[i]}) if texts else c
            for i, c in enumerate(ready.chunks)
        )
        out = ready.model_copy(update={"chunks": chunks, "generate": None})
        topology = self.stage.topology
        await self.stage.publish(
            out,
            topology.of_document("chunks.ready", ready.document),
            stream=topology.chunks_stream.name,
            work=chunks_work(chunks),
        )

    async def texts(
        self, matching: Matching, chunks: list[str], tenant: str = "", urgent: bool = False
    ) -> list[tuple[str, ...]]:
        """Each chunk's matching texts: cached ones read, the others generated (then cached),
        each model call in ``tenant``'s turn."""
        asks = [ask_for(matching, text) for text in chunks]
        model = self.chat.name
        known = await self.cache.get_many(model, asks) if self.cache else [None] * len(asks)
        missing = [i for i, found in enumerate(known) if found is None]
        made = await asyncio.gather(
            *(self._one(matching, asks[i], tenant, urgent) for i in missing)
        )
        self.chunks.labels("generated").inc(len(missing))
        self.chunks.labels("cached").inc(len(asks) - len(missing))
        by_index = dict(zip(missing, made, strict=True))
        return [known[i] or by_index[i] for i in range(len(asks))]

    async def _one(
        self, matching: Matching, ask: Ask, tenant: str, urgent: bool
    ) -> tuple[str, ...]:
        """One chunk's texts, kept at once: if another chunk of the message fails, a retry
        generates only what is still missing."""
        async with self._calls.turn(tenant, urgent=urgent):
            started = time.perf_counter()
            answer = await self.chat.chat(ask.system, ask.message, max_tokens=ask.max_tokens)
            self.seconds.observe(time.perf_counter() - started)
        texts = parsed(matching, answer)
        if self.cache:
            await self.cache.put_many(self.chat.name, [ask], [texts])
        return texts
