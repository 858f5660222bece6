"""Answering the searcher's requests side by side."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kbus_shared.bus import JSON_HEADERS
from nats.micro.request import Handler, Request
from nats.micro.service import Service
from pydantic import BaseModel

log = logging.getLogger("kbus.searcher")


class Answering:
    """Answers requests side by side, at most ``limit`` at once.

    nats-py runs a subscription's callbacks one after another, so a callback that answered in
    place would hold every other request while one waits for the embedder, Weaviate or the
    reranker. The callback only takes a slot and starts the answer; when every slot is taken it
    waits, and later requests wait in the subscription.
    """

    def __init__(self, limit: int) -> None:
        self._slots = asyncio.Semaphore(limit)
        self._running: set[asyncio.Task[None]] = set()

    def responder(self, answer: Callable[[bytes], Awaitable[BaseModel]]) -> Handler:
        """The endpoint handler for ``answer``."""

        async def respond(request: Request) -> None:
            await self._slots.acquire()
            task = asyncio.create_task(self._respond(answer, request))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

        return respond

    async def _respond(
        self, answer: Callable[[bytes], Awaitable[BaseModel]], request: Request
    ) -> None:
        try:
            reply = await answer(request.data)
            await request.respond(reply.model_dump_json().encode(), headers=JSON_HEADERS)
        except Exception:
            # `answer` turns failures into error replies; this is the reply itself failing.
            log.exception("could not send a reply on %s", request.subject)
        finally:
            self._slots.release()

    async def drain(self) -> None:
        """Wait for the answers being worked on."""
        if self._running:
            await asyncio.wait(set(self._running))


@dataclass
class SearchService:
    """The micro service and the answers it has running."""

    service: Service
    answering: Answering

    async def stop(self) -> None:
        """Stop taking requests, then finish the ones being answered."""
        await self.service.stop()
        await self.answering.drain()
