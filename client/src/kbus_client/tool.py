"""Retrieval as a tool: a function-calling schema and a callable that answers it."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kbus_contract import (
    MAX_BUDGET_TOKENS,
    MIN_BUDGET_TOKENS,
    Expand,
    NoMatchReason,
    SearchReply,
)
from kbus_contract.errors import KbusError
from kbus_contract.wire import describe_validation_error
from opentelemetry import trace
from pydantic import BaseModel, ConfigDict, ValidationError

from kbus_client.citing import degraded_note, format_context
from kbus_client.memory import Memory
from kbus_client.surface import KnowledgeBase

MAX_TOOL_K = 20


@dataclass(frozen=True)
class Ask:
    """What a tool call asks of the search besides its query."""

    #: None with a budget and no k asked: the budget decides how many passages.
    k: int | None
    budget_tokens: int | None = None
    expand: Expand = Expand.NONE
    cursor: str | None = None


_tracer = trace.get_tracer("kbus.client")


#: What a model reads when it searched without a query.
NEEDS_QUERY = "A search needs a query: call the tool again with the question as query."


class ToolArguments(BaseModel):
    """A model's arguments to the tool, read leniently (``"5"`` is 5) and checked once."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["search", "remember", "list", "forget"] = "search"
    query: str = ""
    k: int | None = None
    budget_tokens: int | None = None
    expand: Expand | None = None
    cursor: str | None = None
    text: str | None = None
    memory_id: str | None = None


def tool_arguments(arguments: Mapping[str, Any] | str | bytes) -> ToolArguments:
    """A tool call's arguments, as a mapping or the JSON text a model returns, or
    ``ValueError`` saying in one sentence what is wrong with them."""
    if isinstance(arguments, str | bytes):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError as exc:
            raise ValueError(f"the arguments are not JSON ({exc})") from exc
    if not isinstance(arguments, Mapping):
        raise ValueError('the arguments must be a JSON object, such as {"query": "..."}')
    try:
        return ToolArguments.model_validate(dict(arguments))
    except ValidationError as exc:
        raise ValueError(describe_validation_error(exc)) from exc


@dataclass(frozen=True)
class KbTool:
    """A search tool scoped to some libraries; call it with the model's arguments."""

    name: str
    libraries: tuple[str, ...]
    default_k: int
    search: Callable[[str, Ask], Awaitable[SearchReply]]
    description: str | None = None
    #: Where the tool keeps what the agent learned (a tool that only searches has none).
    memory: Memory | None = None
    #: The context a call returns unless it asks for another budget (None: top passages).
    budget_tokens: int | None = None
    expand: Expand = Expand.NONE

    @property
    def parameters(self) -> dict[str, Any]:
        """JSON schema of the arguments."""
        properties: dict[str, Any] = {
            "query": {
                "type": "string",
                "description": "A question or keywords; a full question works best.",
            },
            "k": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TOOL_K,
                "description": f"How many passages to return (default {self.default_k}).",
            },
            **self._context_properties(),
        }
        if self.memory is None:
            return {
                "type": "object",
                "properties": properties,
                "required": ["query"],
                "additionalProperties": False,
            }
        return {
            "type": "object",
            "properties": {**properties, **_MEMORY_PROPERTIES},
            "additionalProperties": False,
        }

    def _context_properties(self) -> dict[str, Any]:
        default = self.budget_tokens or "none: the top passages"
        return {
            "budget_tokens": {
                "type": "integer",
                "minimum": MIN_BUDGET_TOKENS,
                "maximum": MAX_BUDGET_TOKENS,
                "description": "Tokens of context you can afford: passages fill it in rank "
                f"order, each with a citation (default {default}).",
            },
            "expand": {
                "type": "string",
                "enum": [e.value for e in Expand],
                "description": "With budget_tokens, what each passage holds around its hit: "
                "none, neighbours, section or document (default "
                f"{self.expand.value}).",
            },
            "cursor": {
                "type": "string",
                "description": "The cursor a result ended with: its next passages.",
            },
        }

    @property
    def text(self) -> str:
        searching = self.description or (
            "Search the knowledge base (" + ", ".join(self.libraries) + ") and return the most "
            "relevant passages with their titles, sections, sources and relevance scores. "
            "Use it for any question the documents may answer; cite the sources you use."
        )
        if self.memory is None:
            return searching
        return searching + (
            " With action 'remember', keep a fact learned in this conversation (text) for "
            "later searches; 'list' shows what was kept; 'forget' removes one by its memory_id."
        )

    def openai(self) -> dict[str, Any]:
        """The tool in OpenAI's function-calling format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.text,
                "parameters": self.parameters,
            },
        }

    def anthropic(self) -> dict[str, Any]:
        """The tool in Anthropic's tool-use format."""
        return {"name": self.name, "description": self.text, "input_schema": self.parameters}

    async def __call__(
        self,
        query: str,
        k: int | None = None,
        *,
        budget_tokens: int | None = None,
        expand: Expand | str | None = None,
        cursor: str | None = None,
    ) -> str:
        """Run the search and format the result for a model to read: with a budget (the
        call's or the tool's), numbered passages with their citations."""
        top_k = max(1, min(MAX_TOOL_K, k or self.default_k))
        budget = budget_tokens or self.budget_tokens
        if budget is not None:
            budget = max(MIN_BUDGET_TOKENS, min(MAX_BUDGET_TOKENS, budget))
        chosen_k = top_k if k or budget is None else None
        ask = Ask(chosen_k, budget, Expand(expand or self.expand), cursor if budget else None)
        # The span an agent's trace shows for the tool call, the search's spans beneath it.
        with _tracer.start_as_current_span(
            f"tool.{self.name}",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": self.name,
                "kbus.libraries": list(self.libraries),
                "kbus.k": top_k,
                "kbus.budget_tokens": budget or 0,
            },
        ):
            reply = await self.search(query, ask)
            if budget is None:
                return format_for_model(reply)
            return format_context(reply, nothing_matched(reply))

    async def call_json(self, arguments: Mapping[str, Any] | str | bytes) -> str:
        """Run with a model's arguments: a mapping, or the JSON text of its tool call (OpenAI's
        ``function.arguments``). Never raises for the model's mistakes or a failed search:
        each is answered in one sentence the model can act on."""
        try:
            args = tool_arguments(arguments)
        except ValueError as exc:
            return f"Invalid arguments: {exc}. Call the tool again with corrected arguments."
        try:
            return await self._run(args)
        except (KbusError, ValueError) as exc:
            return failed(exc, args.action)

    async def _run(self, args: ToolArguments) -> str:
        if args.action != "search":
            if self.memory is None:
                return f"This tool cannot {args.action}: it only searches."
            return await _remembering(self.memory, args)
        if not args.query.strip():
            return NEEDS_QUERY
        return await self(
            args.query,
            args.k,
            budget_tokens=args.budget_tokens,
            expand=args.expand,
            cursor=args.cursor,
        )


class UnknownLibraryError(ValueError):
    """A tool scoped to libraries its tenant does not have."""

    def __init__(self, tenant: str, missing: Sequence[str], libraries: Sequence[str]) -> None:
        have = ", ".join(libraries) or "none yet"
        super().__init__(
            f"tenant {tenant!r} has no library {', '.join(map(repr, missing))} "
            f"(its libraries: {have})"
        )


def failed(exc: Exception, action: str = "search") -> str:
    """A call that failed, as a model reads it: what happened and what to do."""
    if isinstance(exc, KbusError):
        again = " Try again shortly." if exc.retryable else ""
        return f"The {action} failed ({exc.code}): {exc.reason.rstrip('.')}.{again}"
    return f"The {action} failed: {str(exc).rstrip('.')}."


_MEMORY_PROPERTIES: dict[str, Any] = {
    "action": {
        "type": "string",
        "enum": ["search", "remember", "list", "forget"],
        "description": "search (the default), remember a fact, list what was kept, or forget.",
    },
    "text": {"type": "string", "description": "remember: the fact, in full sentences."},
    "memory_id": {"type": "string", "description": "forget: the id that list showed."},
}


async def _remembering(memory: Memory, args: ToolArguments) -> str:
    """A memory action, answered in words a model reads."""
    action = args.action
    if action == "remember":
        text = (args.text or "").strip()
        if not text:
            return "Nothing to remember: give the fact as text."
        return f"Remembered as {await memory.remember(text)}."
    if action == "list":
        kept = await memory.list()
        if not kept:
            return "Nothing is remembered from this conversation."
        return "\n".join(f"{e.document_id} ({e.metadata.get('time', '')}): {e.title}" for e in kept)
    if action == "forget":
        memory_id = args.memory_id or ""
        if not memory_id.startswith("memory/"):
            return "Give the memory_id that list showed."
        removed = await memory.forget(memory_id)
        return f"Forgot {memory_id}." if removed else f"No memory {memory_id} was found."
    return f"Unknown action {action!r}: use search, remember, list or forget."


def format_for_model(reply: SearchReply) -> str:
    """Passages as a model should read them: rank, score, title, section, source, text."""
    if not reply.searched:
        return "No library was searched."
    if not reply.results:
        return degraded_note(reply) + nothing_matched(reply)
    blocks = []
    for rank, hit in enumerate(reply.results, 1):
        section = " > ".join(hit.heading_path)
        head = [
            f"[{rank}] score {hit.scores.final:.3f} ({reply.score_kind})",
            f"title: {hit.title}",
        ]
        if section:
            head.append(f"section: {section}")
        head.append(f"source: {hit.source_uri or hit.document_id}")
        blocks.append("\n".join(head) + "\n" + hit.text.strip())
    return degraded_note(reply) + "\n\n".join(blocks)


def nothing_matched(reply: SearchReply) -> str:
    """What a model reads when a search found nothing."""
    return f"No passage in the knowledge base matches this query: {why_no_match(reply)}."


def why_no_match(reply: SearchReply) -> str:
    """Why a reply holds no passage, in words ("" when it holds some)."""
    reason = reply.no_match_reason
    best = "none" if reply.best_similarity is None else f"{reply.best_similarity:.2f}"
    if reason is NoMatchReason.NO_CANDIDATES:
        return "nothing in the libraries matched the query"
    if reason is NoMatchReason.WEAK_EVIDENCE:
        coverage = reply.keyword_coverage
        words = "" if coverage is None else f", {coverage:.0%} of its words in one passage"
        return (
            f"the evidence {reply.evidence or 0:.2f} (closest similarity {best}{words}) is under "
            f"the {reply.min_evidence or 0:.2f} floor"
        )
    if reason is NoMatchReason.BELOW_MIN_SIMILARITY:
        return f"the closest similarity {best} is under the {reply.min_similarity or 0:.2f} floor"
    if reason is NoMatchReason.BELOW_MIN_SCORE:
        return f"no passage scored {reply.min_score:g} or more"
    return ""


def scoped_tool(
    client: KnowledgeBase,
    *,
    libraries: list[str] | tuple[str, ...],
    name: str = "search_knowledge_base",
    tenant: str | None = None,
    k: int = 5,
    description: str | None = None,
    budget_tokens: int | None = None,
    expand: Expand | str = Expand.NONE,
    write: bool = False,
    memory_library: str | None = None,
    conversation: str = "default",
    principals: Sequence[str] = (),
) -> KbTool:
    """Retrieval as a tool for function calling, scoped to these libraries. With ``write``, the
    tool also remembers, lists and forgets what the agent learned, in ``memory_library`` (the
    first library by default), which it searches too. With ``budget_tokens`` a call returns
    numbered passages that fill it (``expand`` around each hit), each with its citation.
    ``principals``: whom the agent acts for (its searches read what they may; its memories are
    theirs only); the model cannot change them."""
    chosen = client.tenant_for(tenant)
    memory = None
    if write:
        kept = memory_library or libraries[0]
        memory = Memory(client, kept, conversation, name, chosen, tuple(principals))
        libraries = tuple(dict.fromkeys((*libraries, kept)))

    known: set[str] = set()
    remembered_in = memory.library if memory is not None else None

    async def run(query: str, ask: Ask) -> SearchReply:
        # A library that does not exist is an error, not a search that matches nothing (the
        # memory's library is made by its first memory).
        if unchecked := [lib for lib in libraries if lib not in known and lib != remembered_in]:
            known.update(await client.library_names(tenant=chosen, principals=principals))
            if missing := [lib for lib in unchecked if lib not in known]:
                raise UnknownLibraryError(chosen, missing, sorted(known))
        return await client.search(
            query,
            libraries=libraries,
            tenant=chosen,
            k=ask.k,
            budget_tokens=ask.budget_tokens,
            expand=ask.expand,
            cursor=ask.cursor,
            principals=principals,
        )

    return KbTool(
        name=name,
        libraries=tuple(libraries),
        default_k=k,
        search=run,
        description=description,
        memory=memory,
        budget_tokens=budget_tokens,
        expand=Expand(expand),
    )
