"""What a client gives an agent: a memory, and retrieval as a tool."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kbus_client.memory import Memory
from kbus_client.tool import KbTool, scoped_tool


class AgentTools:
    """The agent-facing calls of :class:`kbus_client.KbClient`."""

    def tenant_for(self, tenant: str | None = None) -> str:
        raise NotImplementedError

    def memory(
        self,
        library: str,
        *,
        conversation: str,
        source: str = "agent",
        tenant: str | None = None,
        principals: Sequence[str] = (),
    ) -> Memory:
        """What an agent learns, kept as documents of ``library`` (one its credential may
        write), marked with the conversation, the time and the source; with ``principals``,
        readable by them only."""
        return Memory(
            self,  # type: ignore[arg-type]  # a KbClient: it publishes, lists and deletes
            library,
            conversation,
            source,
            self.tenant_for(tenant),
            tuple(principals),
        )

    def as_tool(self, *, libraries: list[str] | tuple[str, ...], **options: Any) -> KbTool:
        """Retrieval as a tool for function calling, scoped to these libraries; ``options`` are
        :func:`kbus_client.tool.scoped_tool`'s (name, tenant, k, description, write,
        principals, ...)."""
        return scoped_tool(self, libraries=libraries, **options)  # type: ignore[arg-type]
