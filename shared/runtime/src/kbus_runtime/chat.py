"""Chat models kbus prompts: Cohere, or any OpenAI-compatible endpoint (vLLM, Ollama, a
llama.cpp server: a URL and a model name).

One call shape for both: an instruction and a user message in, the reply's text out, at
temperature 0 (greedy). That is no promise of the same text for the same prompt: a llama.cpp
server reuses the cached part of a prompt, and its numerics can tip a near tie, so what must not
change is kept (generated texts are cached), never asked again. Failures are typed as everywhere in
kbus: an endpoint that is down, slow or overloaded is a ``TransientError`` (try again later); one
that refuses the request (bad model, bad key) is a ``PermanentError``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import httpx
from kbus_contract import ChatState
from kbus_contract.errors import ErrorCode, KbusError, PermanentError, TransientError
from kbus_contract.wire import CHAT_CHECK_S
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from kbus_runtime import cohere_api
from kbus_runtime.settings import DEPLOY, CohereSettings

ChatBackend = Literal["cohere", "openai"]


class LLMSettings(BaseSettings):
    """An OpenAI-compatible chat endpoint (env prefix ``KBUS_LLM_``)."""

    model_config = SettingsConfigDict(env_prefix="KBUS_LLM_", extra="ignore")

    url: str = Field(
        json_schema_extra=DEPLOY,
        default="http://127.0.0.1:8180/v1",
        description="Base URL of an OpenAI-compatible chat API (it ends before /chat/completions); "
        "the default is where python -m kbus_dev up --llm serves one.",
    )
    model: str = Field(
        default="SmolLM2-135M-Instruct",
        description="Model name sent to the endpoint; the default is the one devtools serves.",
    )
    api_key: SecretStr | None = Field(
        json_schema_extra=DEPLOY,
        default=None,
        description="Bearer token for the endpoint (secret), if it wants one.",
    )
    timeout_s: float = Field(default=30.0, gt=0, description="Timeout of one chat call, seconds.")


class ChatModel(Protocol):
    """A chat model: ``name`` says which (backend/model) in replies and logs."""

    name: str

    async def chat(self, instruction: str, message: str, *, max_tokens: int) -> str: ...

    async def choose(
        self, instruction: str, message: str, options: Sequence[str]
    ) -> dict[str, float]: ...


#: Alternatives asked for at the first token of a choice: enough to find every option's
#: spelling ("yes", "Yes", " yes") among them.
TOP_LOGPROBS = 10


class MalformedAnswerError(PermanentError):
    """The model answered in another form than the one asked for."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=ErrorCode.MALFORMED_ANSWER)


def option_probabilities(
    name: str, text: str, top: Sequence[tuple[str, float]], options: Sequence[str]
) -> dict[str, float]:
    """Each option's probability as the answer's first word, from the first token's top
    alternatives (``top``: token and log-probability); from the answer's text alone (1 for the
    option it starts with) where the endpoint gives none.

    Raises:
        MalformedAnswerError: no option is among the alternatives, nor begins the text.
    """
    mass = dict.fromkeys(options, 0.0)
    for token, logprob in top:
        word = token.strip().strip(".,:!\"'").lower()
        if word in mass:
            mass[word] += math.exp(logprob)
    total = sum(mass.values())
    if total > 0:
        return {option: p / total for option, p in mass.items()}
    words = text.strip().lower().split()
    first = words[0].strip(".,:!\"'") if words else ""
    if first in mass:
        return {option: float(option == first) for option in options}
    raise MalformedAnswerError(f"{name} answered {text[:60]!r}, none of {', '.join(options)}")


class OpenAIChat:
    """``POST {url}/chat/completions`` with httpx."""

    def __init__(self, settings: LLMSettings) -> None:
        headers = {}
        if settings.api_key is not None:
            headers["Authorization"] = f"Bearer {settings.api_key.get_secret_value()}"
        self.client = httpx.AsyncClient(
            base_url=settings.url, headers=headers, timeout=settings.timeout_s
        )
        self.model = settings.model
        self.name = f"openai/{settings.model}"

    async def chat(self, instruction: str, message: str, *, max_tokens: int) -> str:
        return _reply_text(
            self.name, await self._post(self._body(instruction, message, max_tokens))
        )

    async def choose(
        self, instruction: str, message: str, options: Sequence[str]
    ) -> dict[str, float]:
        """One token, with its top alternatives' log-probabilities."""
        body = {
            **self._body(instruction, message, 1),
            "logprobs": True,
            "top_logprobs": TOP_LOGPROBS,
        }
        response = await self._post(body)
        text = _reply_text(self.name, response)
        return option_probabilities(self.name, text, _first_top(response), options)

    def _body(self, instruction: str, message: str, max_tokens: int) -> dict[str, Any]:
        """An OpenAI chat request: the instruction as the system's, greedy decoding."""
        return {
            "model": self.model,
            "messages": [
                {"role": "system", "content": instruction},
                {"role": "user", "content": message},
            ],
            "temperature": 0.0,
            "max_tokens": max_tokens,
        }

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        try:
            return await self.client.post("chat/completions", json=body)
        except httpx.TransportError as exc:
            raise TransientError(f"{self.name}: {type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        await self.client.aclose()


def _reply_text(name: str, response: httpx.Response) -> str:
    """The first choice's text; the status says whether trying again can help."""
    if response.status_code == 429 or response.status_code >= 500:
        raise TransientError(f"{name} answered {response.status_code}: {response.text[:200]}")
    if response.status_code >= 400:
        raise PermanentError(
            f"{name} refused the request ({response.status_code}): {response.text[:200]}"
        )
    try:
        content: Any = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise PermanentError(f"{name} answered something that is not a chat completion") from exc
    return content if isinstance(content, str) else ""


def _first_top(response: httpx.Response) -> list[tuple[str, float]]:
    """The first token's alternatives (none when the endpoint gives no log-probabilities)."""
    try:
        content = response.json()["choices"][0]["logprobs"]["content"]
        return [(str(t["token"]), float(t["logprob"])) for t in content[0]["top_logprobs"]]
    except (ValueError, KeyError, IndexError, TypeError):
        return []


class CohereChat:
    """A Cohere chat model (needs ``KBUS_COHERE_API_KEY``)."""

    def __init__(self, settings: CohereSettings, purpose: str) -> None:
        self.client = cohere_api.async_client(settings, purpose)
        self.model = settings.chat_model
        self.name = f"cohere/{settings.chat_model}"

    async def chat(self, instruction: str, message: str, *, max_tokens: int) -> str:
        from cohere import SystemChatMessageV2, UserChatMessageV2

        with cohere_api.calling("chat"):
            response = await self.client.chat(
                model=self.model,
                messages=[
                    SystemChatMessageV2(content=instruction),
                    UserChatMessageV2(content=message),
                ],
                temperature=0.0,
                max_tokens=max_tokens,
            )
        parts = response.message.content or []
        return "".join(getattr(p, "text", "") for p in parts)

    async def choose(
        self, instruction: str, message: str, options: Sequence[str]
    ) -> dict[str, float]:
        """The option the answer starts with (Cohere gives no alternatives' probabilities)."""
        text = await self.chat(instruction, message, max_tokens=2)
        return option_probabilities(self.name, text, [], options)

    async def close(self) -> None:
        return None


def create_chat(
    backend: ChatBackend, llm: LLMSettings, cohere: CohereSettings, purpose: str
) -> ChatModel:
    """The chat model of a backend (``purpose`` names what needs it, in configuration errors)."""
    if backend == "cohere":
        return CohereChat(cohere, purpose)
    return OpenAIChat(llm)


#: The readiness check's instruction and message (one word asked for).
READY_CHECK = ("Answer with one word.", "Ready?")


async def state_of(service: str, chat: ChatModel | None, unset: str) -> ChatState:
    """Whether ``chat`` answers a one-word request now (``unset``: why the service has none)."""
    if chat is None:
        return ChatState(service=service, ready=False, reason=unset)
    try:
        async with asyncio.timeout(CHAT_CHECK_S):
            await chat.chat(*READY_CHECK, max_tokens=1)
    except TimeoutError:
        reason = f"{chat.name} did not answer within {CHAT_CHECK_S:g} s"
    except KbusError as exc:
        reason = exc.reason
    else:
        return ChatState(service=service, model=chat.name, ready=True)
    return ChatState(service=service, model=chat.name, ready=False, reason=reason)
