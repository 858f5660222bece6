"""The same client for code without an event loop: every call blocks until it is done."""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable, Coroutine, Mapping
from types import TracebackType
from typing import Any, TypeVar

from kbus_client.client import DEFAULT_URL, KbClient
from kbus_client.tool import KbTool

T = TypeVar("T")


class SyncKbClient:
    """A :class:`KbClient` whose every method blocks: the same methods, arguments and results
    (``publish_document``, ``search``, ``sync_library``, ``delete_document``, ``documents``,
    ``stats``, ...), run on a private event loop in a background thread.

    ``SyncKbClient.connect(url, **options)`` (or the constructor) takes
    :meth:`KbClient.connect`'s arguments; close it, or use it in a ``with`` block.
    """

    def __init__(self, url: str = DEFAULT_URL, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="kbus-client"
        )
        self._thread.start()
        try:
            self._client = self._run(KbClient.connect(url, **options))
        except BaseException:
            self._stop()
            raise

    @classmethod
    def connect(cls, url: str = DEFAULT_URL, **options: Any) -> SyncKbClient:
        """Connect, as :meth:`KbClient.connect` does."""
        return cls(url, **options)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __getattr__(self, name: str) -> Any:
        """:class:`KbClient`'s attribute of this name; a coroutine method made to block."""
        if name.startswith("_"):
            raise AttributeError(name)
        found = getattr(self._client, name)
        if not inspect.iscoroutinefunction(found):
            return found

        @functools.wraps(found)
        def blocking(*args: Any, **kwargs: Any) -> Any:
            return self._run(found(*args, **kwargs))

        return blocking

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {n for n in dir(KbClient) if n[0] != "_"})

    def as_tool(self, **kwargs: Any) -> SyncKbTool:
        """See :meth:`KbClient.as_tool`; the tool's call blocks."""
        return SyncKbTool(self._client.as_tool(**kwargs), self._run)

    def close(self) -> None:
        """Close the connection and stop the background loop."""
        self._run(self._client.close())
        self._stop()

    def _stop(self) -> None:
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
    """A :class:`KbTool` whose calls block."""

    def __init__(self, tool: KbTool, run: Callable[[Coroutine[Any, Any, str]], str]) -> None:
        self.tool = tool
        self._run = run
        self.name = tool.name

    def openai(self) -> dict[str, Any]:
        return self.tool.openai()

    def anthropic(self) -> dict[str, Any]:
        return self.tool.anthropic()

    def __call__(self, query: str, k: int | None = None, **context: Any) -> str:
        """See :meth:`KbTool.__call__` (``budget_tokens``, ``expand``, ``cursor``)."""
        return self._run(self.tool(query, k, **context))

    def call_json(self, arguments: Mapping[str, Any] | str | bytes) -> str:
        """See :meth:`KbTool.call_json`: a model's arguments, answered in words."""
        return self._run(self.tool.call_json(arguments))
