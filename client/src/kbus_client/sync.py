"""The same client for code without an event loop: every call blocks until it is done."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, TypeVar

from kbus_contract import SearchReply

from kbus_client.client import KbClient
from kbus_client.results import PublishResult
from kbus_client.tool import KbTool

T = TypeVar("T")


class SyncKbClient:
    """Runs a :class:`KbClient` on a private event loop in a background thread."""

    def __init__(self, url: str = "nats://127.0.0.1:4222", **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="kbus-client"
        )
        self._thread.start()
        self._client = self._run(KbClient.connect(url, **options))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def publish_document(self, **kwargs: Any) -> PublishResult:
        """See :meth:`KbClient.publish_document`."""
        return self._run(self._client.publish_document(**kwargs))

    def search(self, query: str, **kwargs: Any) -> SearchReply:
        """See :meth:`KbClient.search`."""
        return self._run(self._client.search(query, **kwargs))

    def as_tool(self, **kwargs: Any) -> SyncKbTool:
        """See :meth:`KbClient.as_tool`; the tool's call blocks."""
        return SyncKbTool(self._client.as_tool(**kwargs), self)

    def close(self) -> None:
        self._run(self._client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def __enter__(self) -> SyncKbClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SyncKbTool:
    """A :class:`KbTool` whose call blocks."""

    def __init__(self, tool: KbTool, client: SyncKbClient) -> None:
        self.tool = tool
        self._client = client
        self.name = tool.name

    def openai(self) -> dict[str, Any]:
        return self.tool.openai()

    def anthropic(self) -> dict[str, Any]:
        return self.tool.anthropic()

    def __call__(self, query: str, k: int | None = None, **context: Any) -> str:
        """See :meth:`KbTool.__call__` (``budget_tokens``, ``expand``, ``cursor``)."""
        return self._client._run(self.tool(query, k, **context))
