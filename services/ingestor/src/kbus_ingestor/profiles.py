"""Library profiles: kept in a key-value bucket, set and read over ``kb.profile``, and looked up
for each document.

The ingestor is the only writer, so a profile is checked (its pattern compiled by RE2, its
sizes fitted to the ingestor's, its example cut) before anything keeps it. A document reads
its library's profile when it is ingested: one key-value read, so a change applies at once to
every replica and to every document ingested after it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from kbus_contract import ContentType, ErrorReply, LibraryProfile, ProfileReply, ProfileRequest
from kbus_contract.errors import ErrorCode, PermanentError, TransientError
from kbus_contract.profiles import PREVIEW_CHARS, PREVIEW_CHUNKS, ExampleChunk, profile_key
from kbus_contract.tenancy import Identity, require_granted, require_tenant
from kbus_runtime.answering import Inbound
from kbus_runtime.budgets import Resource, over_budget
from kbus_runtime.declaring import open_bucket
from kbus_runtime.stage import Stage
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig
from nats.js.errors import KeyNotFoundError
from nats.js.kv import KeyValue
from pydantic import ValidationError

from kbus_ingestor.chat_links import ChatModels
from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.parsing import Parsed
from kbus_ingestor.profiling import Cutter, cut_pieces

log = logging.getLogger("kbus.ingestor")


class Profiles:
    """The profiles bucket and the ``kb.profile`` requests that read and set it."""

    def __init__(self, stage: Stage, config: KeyValueConfig, default: ChunkingConfig) -> None:
        self.stage = stage
        self.config = config
        self.default = default
        self._kv: KeyValue | None = None
        self.chat_models = ChatModels()

    async def open(self, js: JetStreamContext, *, create: bool) -> None:
        self._kv = await open_bucket(js, self.config, create=create)

    @property
    def kv(self) -> KeyValue:
        if self._kv is None:
            raise RuntimeError("the profiles bucket is not open")
        return self._kv

    async def read(self, tenant: str, library: str) -> tuple[int, LibraryProfile]:
        """The library's profile and its revision (0 and the defaults when none was set).

        Raises:
            TransientError: the bucket could not be read.
            PermanentError: what is kept is not a profile (written around the ingestor).
        """
        try:
            entry = await self.kv.get(profile_key(tenant, library))
        except KeyNotFoundError:
            return 0, LibraryProfile()
        except NatsError as exc:
            raise TransientError(f"the profiles bucket could not be read: {exc}") from exc
        try:
            return entry.revision or 0, LibraryProfile.model_validate_json(entry.value or b"")
        except ValidationError as exc:
            raise PermanentError(
                f"library {library!r} has a profile that is not valid: {exc.errors()[0]['msg']}",
                code=ErrorCode.BAD_PROFILE,
            ) from exc

    async def for_ingest(self, tenant: str, library: str) -> tuple[Cutter, LibraryProfile]:
        """How the library's documents are cut now, and its whole profile."""
        _, profile = await self.read(tenant, library)
        return self._cutter(profile), profile

    def _cutter(self, profile: LibraryProfile) -> Cutter:
        try:
            return Cutter.of(profile, self.default)
        except ValueError as exc:
            raise PermanentError(
                f"the library's profile cannot work: {exc}", code=ErrorCode.BAD_PROFILE
            ) from exc

    async def answer(self, inbound: Inbound) -> ProfileReply | ErrorReply:
        """Answer one ``kb.profile.{tenant}.{grant}`` request."""
        return await self._answer(inbound, self.handle)

    async def answer_read(self, inbound: Inbound) -> ProfileReply | ErrorReply:
        """Answer one ``kb.readprofile.{tenant}.{grant}`` request: reads only."""
        return await self._answer(inbound, self.handle_read)

    async def _answer(
        self,
        inbound: Inbound,
        handle: Callable[[ProfileRequest, Identity], Awaitable[ProfileReply]],
    ) -> ProfileReply | ErrorReply:
        sent = self.stage.topology.identity(inbound.subject)
        return await self.stage.answer(
            inbound.body, ProfileRequest, lambda req: handle(req, sent), sent.tenant
        )

    async def handle_read(self, req: ProfileRequest, sent: Identity) -> ProfileReply:
        """Read the profile; a request that would set one is refused (its subject is a
        reader's)."""
        if req.profile is not None or req.example is not None:
            raise PermanentError(
                "kb.readprofile only reads a profile; set one on kb.profile",
                code=ErrorCode.READ_ONLY,
            )
        return await self.handle(req, sent)

    async def handle(self, req: ProfileRequest, sent: Identity) -> ProfileReply:
        """Read the profile, or check a new one, keep it and say its revision."""
        require_tenant(sent, req.tenant)
        require_granted(sent, (req.library,))
        if req.profile is None:
            revision, profile = await self.read(req.tenant, req.library)
            return ProfileReply(
                tenant=req.tenant, library=req.library, revision=revision, profile=profile
            )
        cutter = self._cutter(req.profile)
        chunks, preview = self._try(cutter, req) if req.example is not None else (None, ())
        _, kept = await self.read(req.tenant, req.library)
        connection = self.stage.broker.connection
        await self.chat_models.require(connection, self.stage.topology, req.profile, kept)
        revision = await self._keep(req, req.profile)
        log.info("library %s/%s: profile revision %d", req.tenant, req.library, revision)
        return ProfileReply(
            tenant=req.tenant,
            library=req.library,
            revision=revision,
            profile=req.profile,
            example_chunks=chunks,
            example_preview=preview,
        )

    @staticmethod
    def _try(cutter: Cutter, req: ProfileRequest) -> tuple[int, tuple[ExampleChunk, ...]]:
        """Cut the example as a document of its type is cut when it is ingested (Markdown by
        its sections): how many chunks, and the first ones; a pattern that finds nothing in it
        refuses the profile."""
        example = req.example or ""
        if cutter.pattern is not None and cutter.pattern.search(example) is None:
            raise PermanentError(
                "the pattern matches nothing in the example", code=ErrorCode.BAD_PROFILE
            )
        markdown = req.example_type is ContentType.MARKDOWN
        count, preview = 0, list[ExampleChunk]()
        for piece in cut_pieces(Parsed(example, markdown=markdown), cutter):
            count += 1
            if len(preview) < PREVIEW_CHUNKS:
                text = piece.span.text[:PREVIEW_CHARS]
                preview.append(ExampleChunk(heading_path=piece.heading_path, text=text))
        return count, tuple(preview)

    async def _keep(self, req: ProfileRequest, profile: LibraryProfile) -> int:
        key = profile_key(req.tenant, req.library)
        try:
            await self._room_for(req.tenant, key)
            return await self.kv.put(key, profile.model_dump_json().encode())
        except NatsError as exc:
            raise TransientError(f"the profile could not be kept: {exc}") from exc

    async def _room_for(self, tenant: str, key: str) -> None:
        """Refuse a new library's profile past the tenant's budget (a library's own is
        replaced: that takes no more room)."""
        stage = self.stage
        if stage.budgets is None or stage.usage is None:
            return
        stream = f"KV_{self.config.bucket}"
        if await stage.usage.read(stream, f"$KV.{self.config.bucket}.{key}"):
            return
        held = await stage.usage.messages(stream, f"$KV.{self.config.bucket}.{tenant}.>")
        over_budget(
            tenant,
            Resource.PROFILES,
            held + 1,
            stage.budgets.of(tenant).count(Resource.PROFILES),
            "remove one, or ask the operator for a larger budget",
        )
