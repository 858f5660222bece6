"""The generation stage on real servers: the ingestor sends a library's chunks to the generator
when its profile asks for matching texts, the generator has a real LLM (SmolLM2-135M-Instruct
on llama-cpp-python's server) write them and passes the chunks on to be embedded.

Asserted is what kbus does with the model's text (kept when it is of the asked form, cached so
that a restart generates nothing again, dead-lettered with the reason otherwise), not the
model's wisdom: the expected texts come from asking the same model the same thing here.
"""

from __future__ import annotations

import json

from faststream import TestApp
from kbus_client import KbClient
from kbus_contract import ChunksReady, DeadLetter, LibraryProfile, Matching, MatchingKind
from kbus_contract.errors import PermanentError
from kbus_contract.topology import Topology
from kbus_dev.llm import MODEL_NAME
from kbus_dev.servers import free_port
from kbus_generator.app import create_app as generator_app
from kbus_generator.prompts import ask_for, parsed
from kbus_generator.settings import GeneratorSettings
from kbus_ingestor.app import create_app as ingestor_app
from kbus_ingestor.settings import IngestorSettings
from kbus_runtime.chat import LLMSettings, OpenAIChat
from kbus_runtime.settings import BusSettings
from nats.aio.client import Client

from tests.helpers import document, publish_raw, read_stream, take_work

TEXT = (
    "The kettle K1 holds 1.7 litres and boils water in two minutes. It switches itself off "
    "when the water boils or when it is lifted from its base."
)
QUESTIONS = Matching(kind=MatchingKind.QUESTIONS, count=2)
#: An instruction the model follows with something that is no question.
ODD = Matching(kind=MatchingKind.QUESTIONS, prompt="Reply with the single word OK.")


async def _expected(url: str, matching: Matching) -> tuple[str, ...] | PermanentError:
    chat = OpenAIChat(LLMSettings(url=url, model=MODEL_NAME, timeout_s=120))
    ask = ask_for(matching, TEXT)
    answer = await chat.chat(ask.system, ask.message, max_tokens=ask.max_tokens)
    await chat.close()
    try:
        return parsed(matching, answer)
    except PermanentError as exc:
        return exc


def _generator(bus: BusSettings, url: str) -> GeneratorSettings:
    return GeneratorSettings(bus=bus, llm=LLMSettings(url=url, model=MODEL_NAME, timeout_s=120))


async def test_a_library_s_chunks_get_generated_matching_texts_once(
    nc: Client, bus: BusSettings, topology: Topology, llm: str
) -> None:
    expected = await _expected(llm, QUESTIONS)
    assert not isinstance(expected, PermanentError), f"the model wrote no question: {expected}"
    doc = document("shop", "faq", "kettle", TEXT)
    async with TestApp(ingestor_app(IngestorSettings(bus=bus))):
        kb = KbClient(nc, prefix=topology.prefix, tenant="shop")
        await kb.profile("faq", set_to=LibraryProfile(matching=QUESTIONS))
        async with TestApp(generator_app(_generator(bus, llm))):
            await publish_raw(nc, topology, json.dumps(doc).encode())
            [first] = await take_work(nc, topology.chunks_ready, "embedder", count=1, timeout_s=300)
        # A restarted generator whose model is gone still passes the same chunks on: what was
        # generated is read back, never generated again.
        gone = f"http://127.0.0.1:{free_port()}/v1"
        async with TestApp(generator_app(_generator(bus, gone))):
            again = {**doc, "version": "v2"}
            await publish_raw(nc, topology, json.dumps(again).encode())
            [second] = await take_work(nc, topology.chunks_ready, "embedder", count=1)
    for ready in (ChunksReady.model_validate(first), ChunksReady.model_validate(second)):
        [chunk] = ready.chunks
        assert (chunk.text, chunk.matching) == (TEXT, expected)
        assert ready.generate is None  # done: the embedder sees ordinary chunks


async def test_an_answer_of_another_form_dead_letters_the_document_with_the_reason(
    nc: Client, bus: BusSettings, topology: Topology, llm: str
) -> None:
    expected = await _expected(llm, ODD)
    doc = document("shop", "odd", "kettle", TEXT)
    async with TestApp(ingestor_app(IngestorSettings(bus=bus))):
        kb = KbClient(nc, prefix=topology.prefix, tenant="shop")
        await kb.profile("odd", set_to=LibraryProfile(matching=ODD))
        async with TestApp(generator_app(_generator(bus, llm))):
            await publish_raw(nc, topology, json.dumps(doc).encode())
            if isinstance(expected, PermanentError):
                [letter] = await read_stream(nc, topology.dead_letters, count=1, timeout_s=300)
                dead = DeadLetter.model_validate(letter)
                assert (dead.document_id, dead.code, dead.stage) == (
                    "kettle",
                    "generation_malformed",
                    "generator",
                )
                assert "holds no question" in dead.reason
            else:  # the model asked questions after all: they are kept
                [ready] = await take_work(nc, topology.chunks_ready, "embedder", count=1)
                assert ChunksReady.model_validate(ready).chunks[0].matching == expected
