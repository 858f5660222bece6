"""Memory for agents: what an agent learned, kept as documents it can find, list and forget.

Each memory is a document of a library the agent's credential may write, with metadata that
says where it came from (``kind`` = memory, the conversation, the time, the source), so it is
searched like any document, filtered by conversation, and removed on request.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

from kbus_contract import DocumentEntry

from kbus_client.surface import KnowledgeBase

MEMORY_KIND = "memory"


@dataclass(frozen=True)
class Memory:
    """One agent's memory in one library."""

    client: KnowledgeBase
    library: str
    conversation: str
    source: str
    tenant: str
    #: Whom the agent acts for: its memories are readable by them only, and listed for them.
    principals: tuple[str, ...] = ()

    async def remember(self, text: str, *, title: str = "") -> str:
        """Keep ``text``; returns its id once it is searchable."""
        memory_id = f"memory/{self.conversation}/{uuid.uuid4().hex[:12]}"
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        await self.client.publish_document(
            library=self.library,
            document_id=memory_id,
            title=title or text[:80],
            text=text,
            tenant=self.tenant,
            metadata={
                "kind": MEMORY_KIND,
                "conversation": self.conversation,
                "time": now,
                "source": self.source,
            },
            access=self.principals or None,
            wait=True,
        )
        return memory_id

    async def list(self, *, every_conversation: bool = False) -> tuple[DocumentEntry, ...]:
        """What this conversation (or every conversation) kept, up to a thousand."""
        wanted = {"kind": MEMORY_KIND}
        if not every_conversation:
            wanted["conversation"] = self.conversation
        return await self.client.documents(
            self.library,
            filters=dict(wanted),
            limit=1_000,
            tenant=self.tenant,
            principals=self.principals,
        )

    async def forget(self, memory_id: str) -> int:
        """Remove a memory; returns how many chunks went (0: there was no such memory)."""
        if not memory_id.startswith("memory/"):
            raise ValueError(f"{memory_id!r} is not a memory's id")
        removed = await self.client.delete_document(
            library=self.library, document_id=memory_id, tenant=self.tenant, wait=True
        )
        return removed.chunks_deleted if removed else 0
