"""Chat models kbus prompts: Cohere, or any OpenAI-compatible endpoint (vLLM, Ollama, a
llama.cpp server: a URL and a model name).

One call shape for both: an instruction and a user message in, the reply's text out, at
temperature 0 so that the same prompt gives the same text. Failures are typed as everywhere in
kbus: an endpoint that is down, slow or overloaded is a ``TransientError`` (try again later); one
that refuses the request (bad model, bad key) is a ``PermanentError``.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import httpx
from kbus_contract.errors import PermanentError, TransientError
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from kbus_runtime.settings import CohereSettings

ChatBackend = Literal["cohere", "openai"]


class LLMSettings(BaseSettings):
    """An OpenAI-compatible chat endpoint (env prefix ``KBUS_LLM_``)."""

    model_config = SettingsConfigDict(env_prefix="KBUS_LLM_", extra="ignore")

    url: str = Field(
        default="http://127.0.0.1:8080/v1",
        description="Base URL of an OpenAI-compatible chat API (it ends before /chat/completions).",
    )
    model: str = Field(
        default="SmolLM2-135M-Instruct",
        description="Model name sent to the endpoint; the default is the one devtools serves.",
    )
    api_key: SecretStr | None = Field(
        default=None, description="Bearer token for the endpoint (secret), if it wants one."
    )
    timeout_s: float = Field(default=30.0, gt=0, description="Timeout of one chat call, seconds.")


class ChatModel(Protocol):
    """A chat model: ``name`` says which (backend/model) in replies and logs."""

    name: str

    async def chat(self, instruction: str, message: str, *, max_tokens: int) -> str: ...


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
        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": instruction},
                {"role": "user", "content": message},
            ],
            "temperature": 0.0,
            "max_tokens": max_tokens,
        }
        try:
            response = await self.client.post("chat/completions", json=body)
        except httpx.TransportError as exc:
            raise TransientError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        return _reply_text(self.name, response)

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


class CohereChat:
    """A Cohere chat model (needs ``KBUS_COHERE_API_KEY``)."""

    def __init__(self, settings: CohereSettings, purpose: str) -> None:
        import cohere

        self.client = cohere.AsyncClientV2(**settings.client_options(purpose))
        self.model = settings.chat_model
        self.name = f"cohere/{settings.chat_model}"

    async def chat(self, instruction: str, message: str, *, max_tokens: int) -> str:
        from cohere import SystemChatMessageV2, UserChatMessageV2

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

    async def close(self) -> None:
        return None


def create_chat(
    backend: ChatBackend, llm: LLMSettings, cohere: CohereSettings, purpose: str
) -> ChatModel:
    """The chat model of a backend (``purpose`` names what needs it, in configuration errors)."""
    if backend == "cohere":
        return CohereChat(cohere, purpose)
    return OpenAIChat(llm)
