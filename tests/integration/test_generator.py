"""The generation stage on real servers: the ingestor sends a library's chunks to the generator
when its profile asks for matching texts, the generator has a real LLM (SmolLM2-135M-Instruct
on llama-cpp-python's server) write them and passes the chunks on to be embedded.

Asserted is what kbus does with the model's text (kept when it is of the asked form, cached so
that a restart generates nothing again, dead-lettered with the reason otherwise), not the
model's wisdom: the expected texts are the model's answers to the generator, recorded on the way.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import AsyncExitStack

from faststream import TestApp
from kbus_client import KbClient
from kbus_contract import ChunksReady, DeadLetter, LibraryProfile, Matching, MatchingKind
from kbus_contract.errors import PermanentError
from kbus_contract.topology import Topology
from kbus_dev.llm import MODEL_NAME
from kbus_dev.servers import free_port
from kbus_generator.app import create_app as generator_app
from kbus_generator.prompts import parsed
from kbus_generator.settings import GeneratorSettings
from kbus_ingestor.app import create_app as ingestor_app
from kbus_ingestor.settings import IngestorSettings
from kbus_runtime.chat import LLMSettings
from kbus_runtime.settings import BusSettings
from nats.aio.client import Client

from tests.helpers import LLMRecorder, document, publish_raw, read_stream, take_work

TEXT = (
    "The kettle K1 holds 1.7 litres and boils water in two minutes. It switches itself off "
    "when the water boils or when it is lifted from its base."
)
QUESTIONS = Matching(kind=MatchingKind.QUESTIONS, count=2)
#: An instruction the model follows with something that is no question.
ODD = Matching(kind=MatchingKind.QUESTIONS, prompt="Reply with the single word OK.")


def _parsed(matching: Matching, answer: str) -> tuple[str, ...] | PermanentError:
    try:
        return parsed(matching, answer)
    except PermanentError as exc:
        return exc


async def _first_answer(model: LLMRecorder, timeout_s: float = 300) -> str:
    for _ in range(int(timeout_s * 10)):
        if model.answers:
            return model.answers[0]
        await asyncio.sleep(0.1)
    raise AssertionError("the generator never asked the model")


def _generator(bus: BusSettings, url: str) -> GeneratorSettings:
    return GeneratorSettings(bus=bus, llm=LLMSettings(url=url, model=MODEL_NAME, timeout_s=120))


async def test_a_library_s_chunks_get_generated_matching_texts_once(
    nc: Client, bus: BusSettings, topology: Topology, llm: str
) -> None:
    doc = document("shop", "faq", "kettle", TEXT)
    async with TestApp(ingestor_app(IngestorSettings(bus=bus))):
        kb = KbClient(nc, prefix=topology.prefix, tenant="shop")
        with LLMRecorder(llm) as model:
            async with TestApp(generator_app(_generator(bus, model.url))):
                # Kept once the generator says its model answers.
                await kb.profile("faq", set_to=LibraryProfile(matching=QUESTIONS))
                await publish_raw(nc, topology, json.dumps(doc).encode())
                expected = _parsed(QUESTIONS, await _first_answer(model))
                assert not isinstance(expected, PermanentError), f"no question: {expected}"
                [first] = await take_work(nc, topology.chunks_ready, "embedder", count=1)
        # A restarted generator whose model is gone still passes the same chunks on: what was
        # generated is read back, never generated again.
        gone = f"http://127.0.0.1:{free_port()}/v1"
        async with TestApp(generator_app(_generator(bus, gone))):
            again = {**doc, "version": "v2"}
            await publish_raw(nc, topology, json.dumps(again).encode())
            [second] = await take_work(nc, topology.chunks_ready, "embedder", count=1)
    assert len(model.answers) == 1  # generated once
    for ready in (ChunksReady.model_validate(first), ChunksReady.model_validate(second)):
        [chunk] = ready.chunks
        assert (chunk.text, chunk.matching) == (TEXT, expected)
        assert ready.generate is None  # done: the embedder sees ordinary chunks


async def test_an_answer_of_another_form_dead_letters_the_document_with_the_reason(
    nc: Client, bus: BusSettings, topology: Topology, llm: str
) -> None:
    doc = document("shop", "odd", "kettle", TEXT)
    with LLMRecorder(llm) as model:
        async with AsyncExitStack() as apps:
            await apps.enter_async_context(TestApp(ingestor_app(IngestorSettings(bus=bus))))
            await apps.enter_async_context(TestApp(generator_app(_generator(bus, model.url))))
            kb = KbClient(nc, prefix=topology.prefix, tenant="shop")
            await kb.profile("odd", set_to=LibraryProfile(matching=ODD))
            await publish_raw(nc, topology, json.dumps(doc).encode())
            expected = _parsed(ODD, await _first_answer(model))
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
