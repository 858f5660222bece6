"""Store wiring: Weaviate clients from settings, one per node, and failing over between them.

The v4 client talks to one host. On a cluster, :class:`WeaviateNodes` keeps a client for every
node and uses one; when that one stops answering its liveness check, the next node that
answers takes over. Calls still waiting on the lost node end then with a connection error (the
client alone would retry a gRPC call to a dead node for about a minute), so they fail as any
store error does (a search gets a retryable error reply, an indexing batch is nacked and
redelivered); the calls after the switch go to a live node. Any node serves any tenant:
Weaviate forwards each request to the replicas that hold the data.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar, cast

import weaviate
from weaviate.aliases.async_ import _AliasAsync
from weaviate.classes.init import AdditionalConfig, Auth, Timeout
from weaviate.collections.collections.async_ import _CollectionsAsync
from weaviate.exceptions import WeaviateConnectionError

from kbus_runtime.settings import StoreSettings, WeaviateNode

log = logging.getLogger("kbus.store")

T = TypeVar("T")
#: What a guarded object hands out as it is: data, and async iterators (pages of their own).
_PLAIN = (str, int, float, bool, bytes, type(None), list, dict, tuple)


class StoreClient(Protocol):
    """What the index uses of a client: a client and :class:`WeaviateNodes` both offer it.
    (The client's own types for these are private to it.)"""

    @property
    def collections(self) -> _CollectionsAsync: ...

    @property
    def alias(self) -> _AliasAsync: ...


def weaviate_client(
    settings: StoreSettings, node: WeaviateNode | None = None
) -> weaviate.WeaviateAsyncClient:
    """An async client of one node (the settings' first without ``node``), not yet connected:
    ``await client.connect()``."""
    node = node or settings.nodes()[0]
    auth = Auth.api_key(settings.api_key.get_secret_value()) if settings.api_key else None
    return weaviate.use_async_with_custom(
        http_host=node.host,
        http_port=node.http_port,
        http_secure=settings.secure,
        grpc_host=node.grpc_host,
        grpc_port=node.grpc_port,
        grpc_secure=settings.secure,
        auth_credentials=auth,
        additional_config=AdditionalConfig(
            timeout=Timeout(
                init=settings.timeout_s, query=settings.timeout_s, insert=settings.timeout_s
            )
        ),
        # The init checks also ask pypi.org for the newest client version: a call to the
        # outside world at every start. connect() still checks that Weaviate answers.
        skip_init_checks=True,
    )


class WeaviateNodes:
    """The clients of a cluster's nodes and the one in use; offers what the index uses of a
    client (``collections``, ``alias``) from the node in use."""

    def __init__(self, settings: StoreSettings) -> None:
        self.clients = [weaviate_client(settings, node) for node in settings.nodes()]
        self.check_s = settings.failover_check_s
        self.current = 0
        #: Set when a node is left: what still waits on it ends.
        self._lost = [asyncio.Event() for _ in self.clients]
        self._guarded = [_Guarded(c.collections, self, i) for i, c in enumerate(self.clients)]
        self._watcher: asyncio.Task[None] | None = None

    @property
    def client(self) -> weaviate.WeaviateAsyncClient:
        """The client of the node in use."""
        return self.clients[self.current]

    @property
    def collections(self) -> _CollectionsAsync:
        if len(self.clients) == 1:
            return self.client.collections
        return cast(_CollectionsAsync, self._guarded[self.current])

    @property
    def alias(self) -> _AliasAsync:
        return self.client.alias

    async def connect(self) -> None:
        """Connect to every node that answers (at least one must); watch the one in use."""
        answered = [await self._connected(c) for c in self.clients]
        if not any(answered):
            await self.client.connect()  # raises the connection error of the first node
        self.current = answered.index(True)
        if len(self.clients) > 1:
            self._watcher = asyncio.create_task(self._watch())

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        for client in self.clients:
            await client.close()

    async def guard(self, call: Awaitable[T], node: int) -> T:
        """``call``'s result, or a connection error once ``node`` is left."""
        lost = self._lost[node]
        task = asyncio.ensure_future(call)
        waiter = asyncio.ensure_future(lost.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()  # the caller gave up (a deadline): so does the call
            raise
        finally:
            waiter.cancel()
        if not task.done():
            task.cancel()
            raise WeaviateConnectionError(f"Weaviate node {node} stopped answering")
        return task.result()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.check_s)
            if not await self._live(self.client):
                await self._fail_over()

    async def _fail_over(self) -> None:
        """Use the next node that answers (the lost one stays in use if none does)."""
        count = len(self.clients)
        for step in range(1, count):
            candidate = (self.current + step) % count
            if await self._live(self.clients[candidate]):
                log.warning(
                    "Weaviate node %d does not answer; now node %d", self.current, candidate
                )
                self._lost[candidate] = asyncio.Event()
                self._lost[self.current].set()
                self.current = candidate
                return

    async def _live(self, client: weaviate.WeaviateAsyncClient) -> bool:
        if not client.is_connected() and not await self._connected(client):
            return False
        try:
            return bool(await asyncio.wait_for(client.is_live(), self.check_s))
        except Exception:  # any failure to answer is a node not to use
            return False

    async def _connected(self, client: weaviate.WeaviateAsyncClient) -> bool:
        try:
            await asyncio.wait_for(client.connect(), self.check_s * 5)
        except Exception:  # a node that is down now may come back; it is tried again
            return False
        return True


class _Guarded:
    """A client object of one node whose calls end when that node is left: every method
    returning an awaitable goes through :meth:`WeaviateNodes.guard`, and every object reached
    from it (a collection, its tenant, ``.query``) is guarded in turn."""

    def __init__(self, target: Any, nodes: WeaviateNodes, node: int) -> None:
        self._target = target
        self._nodes = nodes
        self._node = node

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if callable(value):
            return self._call(value)
        return self._wrap(value)

    def _call(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            if inspect.isawaitable(result):
                return self._nodes.guard(result, self._node)
            return self._wrap(result)

        return call

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, _PLAIN) or hasattr(value, "__aiter__"):
            return value
        return _Guarded(value, self._nodes, self._node)
