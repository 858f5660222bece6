"""Before a profile is kept: the chat models its new links need answer now.

Generated matching texts, a query transformer and prompted reranking each need a chat model,
which another service prompts (the generator, the searcher, the reranker). A profile that turns
one of them on is kept only once that service says its model answers (``kb.chat.<service>``);
otherwise it is refused, saying what is missing and what to start, instead of documents waiting
on a model that never answers and searches quietly degraded.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from kbus_contract import ChatCheck, ChatState, LibraryProfile, RerankerKind, TransformerKind
from kbus_contract.errors import ErrorCode, KbusError, PermanentError
from kbus_contract.topology import Topology
from kbus_contract.wire import CHAT_CHECK_S, request
from nats.aio.client import Client

#: Seconds the ingestor waits for a service's answer (its model has CHAT_CHECK_S to answer it).
WAIT_S = CHAT_CHECK_S + 1.0
#: Seconds a service's answer is taken as still true.
FRESH_S = 10.0


def chat_links(profile: LibraryProfile) -> dict[str, str]:
    """The links of a profile that need a chat model: the service that prompts it, and the
    link as the profile names it."""
    needed = {}
    if profile.matching.generated:
        needed["generator"] = f"matching {profile.matching.kind.value}"
    transformer = profile.transformer.kind
    if transformer in (TransformerKind.QUESTION, TransformerKind.PROMPT):
        needed["searcher"] = f"transformer {transformer.value}"
    if profile.reranker.kind is RerankerKind.PROMPTED:
        needed["reranker"] = "reranker prompted"
    return needed


@dataclass
class ChatModels:
    """Each chat-prompting service's last answer, asked again once it is :data:`FRESH_S` old:
    however many profiles any tenants set, a service is asked at most once in that time, so
    one tenant's profile writes cannot crowd out the answers another's wait for."""

    _answers: dict[str, tuple[float, ChatState]] = field(default_factory=dict)
    _asking: dict[str, asyncio.Lock] = field(default_factory=dict)

    async def require(
        self, nc: Client, topology: Topology, profile: LibraryProfile, kept: LibraryProfile
    ) -> None:
        """Ask each service a link new in ``profile`` (not in the ``kept`` one) needs whether
        its chat model answers.

        Raises:
            PermanentError: one does not (``bad_profile``), or its service is not running.
        """
        before = chat_links(kept)
        new = {s: link for s, link in chat_links(profile).items() if before.get(s) != link}
        states = await asyncio.gather(*(self._state(nc, topology, s) for s in new))
        missing = [
            f"{link} needs the {state.service}'s chat model, and {_why(state)}"
            for link, state in zip(new.values(), states, strict=True)
            if not state.ready
        ]
        if missing:
            raise PermanentError(
                "; ".join(missing) + ". Start a chat model (python -m kbus_dev up --llm serves "
                "one at KBUS_LLM_URL) or leave that link as it was; nothing was kept",
                code=ErrorCode.BAD_PROFILE,
            )

    async def _state(self, nc: Client, topology: Topology, service: str) -> ChatState:
        async with self._asking.setdefault(service, asyncio.Lock()):
            known = self._answers.get(service)
            if known is not None and time.monotonic() - known[0] < FRESH_S:
                return known[1]
            state = await _ask(nc, topology, service)
            self._answers[service] = (time.monotonic(), state)
            return state


async def _ask(nc: Client, topology: Topology, service: str) -> ChatState:
    try:
        subject = topology.subject(f"kb.chat.{service}")
        return await request(nc, subject, ChatCheck(), ChatState, stage=service, timeout_s=WAIT_S)
    except KbusError as exc:
        return ChatState(service=service, ready=False, reason=exc.reason)


def _why(state: ChatState) -> str:
    if not state.model:
        return state.reason
    return f"{state.model} does not answer ({state.reason})"
