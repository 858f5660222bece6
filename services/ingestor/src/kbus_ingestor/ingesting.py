"""From a document message to its chunks on the bus."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from faststream.message.message import AckStatus
from faststream.nats.message import NatsMessage
from kbus_contract import ChunksReady, ContentType, DocumentAdded
from kbus_contract.claimcheck import discard_body, read_body
from kbus_contract.errors import ErrorCode, PermanentError, TransientError
from kbus_contract.identifiers import content_version
from kbus_contract.lanes import Lane
from kbus_contract.tenancy import require_library
from kbus_contract.work import chunks_work
from kbus_runtime.budgets import Resource
from kbus_runtime.redelivery import stream_sequence
from kbus_runtime.stage import Stage
from prometheus_client import CollectorRegistry, Counter

from kbus_ingestor.cutting import Cutting, parts_of
from kbus_ingestor.fetching import PageFetcher
from kbus_ingestor.parsing import Parsed, parse
from kbus_ingestor.profiles import Profiles
from kbus_ingestor.sandbox import ParserPool

log = logging.getLogger("kbus.ingestor")
T = TypeVar("T")


def ranked_as(doc: DocumentAdded, sequence: int) -> int:
    """The sequence a publish ranks by: its own, or for a text cut again, the publish it was
    cut from (so that whatever was published after that one still wins).

    Raises:
        PermanentError: ``recut_of`` names a publish after this one.
    """
    if doc.recut_of is None:
        return sequence
    if sequence and doc.recut_of > sequence:
        raise PermanentError(
            f"recut_of {doc.recut_of} names a publish after this one ({sequence})",
            code=ErrorCode.INVALID_MESSAGE,
        )
    return doc.recut_of


#: Seconds between two looks at a tenant's chunk messages waiting, while it holds its budget.
ROOM_POLL_S = 0.5
#: A text larger than this is cut on a worker thread: the event loop goes on taking other
#: documents (another tenant's small one) while it is cut.
INLINE_BYTES = 64 * 1024


async def _inline_or_thread(large: bool, work: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(work, *args) if large else work(*args)


class Ingestor:
    """Validates documents, splits them and publishes their chunks."""

    def __init__(
        self,
        stage: Stage,
        profiles: Profiles,
        *,
        max_document_bytes: int,
        max_chunks: int,
        registry: CollectorRegistry,
        parser: ParserPool,
        fetcher: PageFetcher,
        keyword_window: int = 1000,
        part_chunks: int = 64,
    ) -> None:
        self.stage = stage
        self.parser = parser
        self.fetcher = fetcher
        self.profiles = profiles
        self.keyword_window = keyword_window
        self.part_chunks = part_chunks
        self.max_document_bytes = max_document_bytes
        self.max_chunks = max_chunks
        self.chunks_made = Counter("kbus_ingestor_chunks", "Chunks produced", registry=registry)

    async def handle(self, message: NatsMessage) -> None:
        """Settle one ``document.added`` message."""
        if len(message.body) > self.max_document_bytes:
            # Checked before parsing, so a huge document costs no memory beyond its bytes.
            await self.stage.settle(message, DocumentAdded, self._too_large(len(message.body)))
            return
        sequence = stream_sequence(message) or 0
        topology = self.stage.topology
        sent = topology.identity(message.raw_message.subject)
        _, lane = topology.tenant_lane("document.added", message.raw_message.subject) or (
            "",
            Lane.BULK,
        )
        claimed: list[DocumentAdded] = []

        async def work(doc: DocumentAdded) -> None:
            require_library(sent, doc.tenant, doc.library)
            if doc.body is not None:
                claimed.append(doc)
            await self.ingest(doc, ranked_as(doc, sequence), lane)

        await self.stage.settle(message, DocumentAdded, work)
        # Done with once indexed: the text can go. A dead-lettered document keeps it (until the
        # store's age limit), so that its replay finds it; a nacked one, for its next delivery.
        if claimed and message.committed is AckStatus.ACKED:
            await self._discard(claimed[0])

    async def ingest(self, doc: DocumentAdded, sequence: int = 0, lane: Lane = Lane.BULK) -> None:
        """Read a document (its text, its claim-checked bytes or its web page), parse it, and
        publish its chunks a part at a time (in the tenant's ``lane`` it came in); a document
        deleted or published again since is left, at once or before its next part."""

        async def wanted() -> bool:
            return await self.stage.wanted(doc.tenant, doc.library, doc.document_id, sequence)

        if not await wanted():
            return
        doc, parsed = await self._parsed(doc)
        large = len(parsed.text) > INLINE_BYTES
        cutter, profile = await self.profiles.for_ingest(doc.tenant, doc.library)
        cutting = Cutting.of(doc, cutter, self.keyword_window, parsed)
        total = await _inline_or_thread(large, cutting.count, self.max_chunks)
        channel, generate = "chunks.ready", None
        if profile.matching.generated and doc.matching is None:
            # The generator writes the matching texts, then passes the chunks on to be embedded;
            # a publisher's own matching texts are kept as they are.
            channel, generate = "chunks.generate", profile.matching
        subject = self.stage.topology.in_lane(channel, lane, tenant=doc.tenant)
        ref = cutting.ref(sequence).with_lane(lane)
        parts = parts_of(cutting.chunks(), self.part_chunks)
        count = -(-total // self.part_chunks)
        for number in range(count):
            if number:
                await self._room(doc.tenant, subject)
                if not await wanted():
                    return
            chunks = await _inline_or_thread(large, next, parts)
            part = ChunksReady(
                document=ref,
                part=number,
                parts=count,
                total_chunks=total,
                chunks=chunks,
                generate=generate,
            )
            await self.stage.publish(
                part,
                subject,
                stream=self.stage.topology.chunks_stream.name,
                work=chunks_work(chunks),
            )
            self.chunks_made.inc(len(chunks))

    async def _parsed(self, doc: DocumentAdded) -> tuple[DocumentAdded, Parsed]:
        """The document parsed, its title and version settled (its bytes are let go here)."""
        doc, content_type, data = await self._read(doc)
        if content_type in (ContentType.PLAIN, ContentType.MARKDOWN):
            large = len(data) > INLINE_BYTES
            parsed = await _inline_or_thread(
                large, parse, content_type, data, None, self.parser.limits
            )
        else:
            parsed = await self.parser.parse(content_type, data, doc.template)
        # The version stays what the message gave (or its fetched bytes), so every redelivery
        # yields the same ids.
        update = {"title": doc.title or parsed.title, "version": doc.effective_version()}
        return doc.model_copy(update=update), parsed

    async def _room(self, tenant: str, subject: str) -> None:
        """Wait while the tenant holds its budget of chunk messages waiting for the embedder:
        a large document is sent on as fast as it is embedded, never piled up in the stream."""
        budgets = self.stage.budgets
        budget = budgets.of(tenant).count(Resource.CHUNK_MESSAGES) if budgets else 0
        if not budget:
            return
        js = self.stage.broker.connection.jetstream()
        stream = self.stage.topology.chunks_stream.name
        while True:
            info = await js.stream_info(stream, subjects_filter=subject)
            if sum((info.state.subjects or {}).values()) < budget:
                return
            if self.stage.stopping.is_set():
                # Handed back: the next delivery sends its parts again (same chunk ids).
                raise TransientError("the ingestor is stopping; the document is taken again")
            await asyncio.sleep(ROOM_POLL_S)

    async def _read(self, doc: DocumentAdded) -> tuple[DocumentAdded, ContentType, bytes]:
        """The document's bytes and their type, from wherever the message says they are."""
        if doc.url is not None:
            page = await self.fetcher.fetch(doc.url)
            version = doc.version or content_version(
                doc.effective_version(), hashlib.sha256(page.data).hexdigest()
            )
            update = {"source_uri": doc.source_uri or page.url, "version": version}
            return doc.model_copy(update=update), page.content_type, page.data
        if doc.body is None:
            return doc, doc.content_type, doc.text.encode("utf-8")
        if doc.body.size > self.max_document_bytes:
            # Refused from the reference alone: a huge body is never read into memory.
            raise PermanentError(
                f"the document is {doc.body.size} bytes; the limit is {self.max_document_bytes}",
                code=ErrorCode.TOO_LARGE,
            )
        js = self.stage.broker.connection.jetstream()
        data = await read_body(js, self.stage.topology, doc.tenant, doc.library, doc.body)
        return doc, doc.content_type, data

    async def _discard(self, doc: DocumentAdded) -> None:
        # After the ack: a crash before this line leaves parts the store's age limit removes.
        assert doc.body is not None
        js = self.stage.broker.connection.jetstream()
        try:
            await discard_body(js, self.stage.topology, doc.tenant, doc.library, doc.body)
        except Exception as exc:
            log.warning("could not remove claim-checked text %s: %s", doc.body.name, exc)

    def _too_large(self, size: int) -> Callable[[DocumentAdded], Awaitable[None]]:
        async def refuse(_: DocumentAdded) -> None:
            raise PermanentError(
                f"the message is {size} bytes; the limit is {self.max_document_bytes}",
                code=ErrorCode.TOO_LARGE,
            )

        return refuse
