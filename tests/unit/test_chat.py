"""The OpenAI-compatible chat client: the request it sends and how it types what comes back.

A transport stand-in answers here; tests/integration/test_llm.py talks to a real llama.cpp server.
"""

from __future__ import annotations

import json
import math

import httpx
import pytest
from kbus_contract.errors import PermanentError, TransientError
from kbus_runtime.chat import LLMSettings, MalformedAnswerError, OpenAIChat, option_probabilities


def _chat(handler: httpx.MockTransport, key: str | None = None) -> OpenAIChat:
    chat = OpenAIChat(LLMSettings(url="http://127.0.0.1:9/v1", model="m", api_key=key))
    chat.client = httpx.AsyncClient(
        base_url="http://127.0.0.1:9/v1", transport=handler, headers=chat.client.headers
    )
    return chat


def _completion(text: object) -> httpx.Response:
    return httpx.Response(200, json={"choices": [{"message": {"content": text}}]})


async def test_it_posts_a_chat_completion_at_temperature_0_with_the_key() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _completion("hello")

    chat = _chat(httpx.MockTransport(answer), key="s3cret")
    assert await chat.chat("be brief", "hi", max_tokens=7) == "hello"
    body = json.loads(seen[0].content)
    assert seen[0].url.path == "/v1/chat/completions"
    assert seen[0].headers["authorization"] == "Bearer s3cret"
    assert body == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
        ],
        "temperature": 0.0,
        "max_tokens": 7,
    }


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (httpx.Response(503, text="loading"), TransientError),
        (httpx.Response(429, text="slow down"), TransientError),
        (httpx.Response(404, text="no such model"), PermanentError),
        (httpx.Response(200, text="not json"), PermanentError),
        (httpx.Response(200, json={"choices": []}), PermanentError),
    ],
)
async def test_a_failed_call_is_typed_by_whether_trying_again_can_help(
    response: httpx.Response, error: type[Exception]
) -> None:
    chat = _chat(httpx.MockTransport(lambda _: response))
    with pytest.raises(error):
        await chat.chat("i", "m", max_tokens=1)


async def test_an_endpoint_that_is_down_is_transient() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(TransientError, match="ConnectError"):
        await _chat(httpx.MockTransport(refuse)).chat("i", "m", max_tokens=1)


async def test_content_that_is_not_text_reads_as_empty() -> None:
    assert (
        await _chat(httpx.MockTransport(lambda _: _completion(None))).chat("i", "m", max_tokens=1)
        == ""
    )


def _judged(text: str, top: list[tuple[str, float]] | None) -> httpx.Response:
    choice: dict[str, object] = {"message": {"content": text}}
    if top is not None:
        alternatives = [{"token": t, "logprob": lp} for t, lp in top]
        choice["logprobs"] = {"content": [{"token": text, "top_logprobs": alternatives}]}
    return httpx.Response(200, json={"choices": [choice]})


async def test_a_choice_asks_for_one_token_and_its_alternatives() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _judged("Yes", [("Yes", math.log(0.5)), (" yes", math.log(0.1)), ("No", -1.2)])

    probabilities = await _chat(httpx.MockTransport(answer)).choose("i", "m", ("yes", "no"))
    body = json.loads(seen[0].content)
    assert (body["max_tokens"], body["logprobs"], body["top_logprobs"]) == (1, True, 10)
    no = math.exp(-1.2)
    assert probabilities == pytest.approx({"yes": 0.6 / (0.6 + no), "no": no / (0.6 + no)})


@pytest.mark.parametrize(
    ("text", "top", "expected"),
    [
        ("no.", None, {"yes": 0.0, "no": 1.0}),  # no log-probabilities: the text decides
        ("Yes, it is", [("Maybe", -0.1)], {"yes": 1.0, "no": 0.0}),
    ],
)
def test_without_the_options_among_the_alternatives_the_text_decides(
    text: str, top: list[tuple[str, float]] | None, expected: dict[str, float]
) -> None:
    assert option_probabilities("m", text, top or [], ("yes", "no")) == expected


async def test_an_answer_that_is_no_option_is_malformed() -> None:
    chat = _chat(httpx.MockTransport(lambda _: _judged("Perhaps", [("Perhaps", -0.1)])))
    with pytest.raises(MalformedAnswerError, match="'Perhaps', none of yes, no"):
        await chat.choose("i", "m", ("yes", "no"))
