"""Before a profile is kept: the chat models its new links need answer now.

Generated matching texts, a query transformer and prompted reranking each need a chat model,
which another service prompts (the generator, the searcher, the reranker). A profile that turns
one of them on is kept only once that service says its model answers (``kb.chat.<service>``);
otherwise it is refused, saying what is missing and what to start, instead of documents waiting
on a model that never answers and searches quietly degraded.
"""

from __future__ import annotations

import asyncio

from kbus_contract import ChatCheck, ChatState, LibraryProfile, RerankerKind, TransformerKind
from kbus_contract.errors import ErrorCode, KbusError, PermanentError
from kbus_contract.topology import Topology
from kbus_contract.wire import request
from kbus_runtime.chat import CHECK_S
from nats.aio.client import Client

#: Seconds the ingestor waits for a service's answer (its model has CHECK_S to answer it).
WAIT_S = CHECK_S + 1.0


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


async def require_chat_models(
    nc: Client, topology: Topology, profile: LibraryProfile, kept: LibraryProfile
) -> None:
    """Ask each service a link new in ``profile`` (not in the ``kept`` one) needs whether its
    chat model answers.

    Raises:
        PermanentError: one does not (``bad_profile``), or its service is not running.
    """
    before = chat_links(kept)
    new = {s: link for s, link in chat_links(profile).items() if before.get(s) != link}
    states = await asyncio.gather(*(_state(nc, topology, service) for service in new))
    missing = [
        f"{link} needs the {state.service}'s chat model, and {_why(state)}"
        for (service, link), state in zip(new.items(), states, strict=True)
        if not state.ready
    ]
    if missing:
        raise PermanentError(
            "; ".join(missing) + ". Start a chat model (python -m kbus_dev up --llm serves one at "
            "KBUS_LLM_URL) or leave that link as it was; nothing was kept",
            code=ErrorCode.BAD_PROFILE,
        )


async def _state(nc: Client, topology: Topology, service: str) -> ChatState:
    try:
        subject = topology.subject(f"kb.chat.{service}")
        return await request(nc, subject, ChatCheck(), ChatState, stage=service, timeout_s=WAIT_S)
    except KbusError as exc:
        return ChatState(service=service, ready=False, reason=exc.reason)


def _why(state: ChatState) -> str:
    if not state.model:
        return state.reason
    return f"{state.model} does not answer ({state.reason})"
