"""The OpenAI-compatible embeddings backend against a real server: llama-cpp-python serving
SmolLM2's mean-pooled embeddings (576 dimensions) on loopback, reached directly or through a
relay that holds, refuses or overloads it. Each failure is the error a user can act on, typed so
that nothing is lost: an outage waits (``unavailable``), only a text refused as such is
dead-lettered."""

from __future__ import annotations

import random

import numpy as np
import pytest
from kbus_contract import InputType
from kbus_contract.errors import ErrorCode, PermanentError, TransientError
from kbus_dev.llm import MODEL_NAME
from kbus_dev.servers import free_port
from kbus_embedder.openai_embeddings import OpenAIEmbedder
from kbus_embedder.settings import OpenAIEmbeddingSettings

from tests.helpers import HOUSEHOLD_WORDS as WORDS
from tests.helpers import LLMRecorder

#: SmolLM2-135M's hidden size: the length of the server's vectors.
SERVER_DIMENSION = 576


def _embedder(url: str, **fields: float) -> OpenAIEmbedder:
    settings = OpenAIEmbeddingSettings(url=url, model=MODEL_NAME)
    return OpenAIEmbedder(settings.model_copy(update=fields))


async def test_the_vectors_do_not_depend_on_how_the_texts_are_batched(
    embeddings_server: str,
) -> None:
    """Random texts in random batch sizes and concurrency: each text gets its own unit vector,
    in its place, the same as asked alone."""
    rng = random.Random(72)
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(1, 12))) for _ in range(10)]
    alone = _embedder(embeddings_server, batch_size=1, concurrency=1)
    assert (alone.model, alone.dimension) == (f"openai/{MODEL_NAME}", SERVER_DIMENSION)
    reference = {t: (await alone.embed([t], InputType.DOCUMENT))[0][0] for t in texts}
    for _ in range(3):
        batched = _embedder(
            embeddings_server, batch_size=rng.randint(2, 7), concurrency=rng.randint(1, 3)
        )
        order = rng.sample(texts, len(texts))
        vectors, states = await batched.embed(order, InputType.DOCUMENT)
        assert states is None  # a server has no token states for the local reranker
        assert vectors.shape == (len(order), SERVER_DIMENSION)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        for text, vector in zip(order, vectors, strict=True):
            assert float(vector @ reference[text]) > 0.999, text
    assert (await alone.embed([], InputType.QUERY))[0].shape == (0, SERVER_DIMENSION)


async def test_an_overloaded_server_is_waited_out_then_handed_back_as_an_outage(
    embeddings_server: str,
) -> None:
    with LLMRecorder(embeddings_server) as relay:
        embedder = _embedder(relay.url, dimensions=SERVER_DIMENSION, rate_limit_wait_s=2.0)
        relay.faults = [(429, {"Retry-After": "0.2"}), (429, {})]
        vectors, _ = await embedder.embed(["the pump primes itself"], InputType.DOCUMENT)
        assert vectors.shape == (1, SERVER_DIMENSION)
        assert len(relay.asked) == 3
        assert relay.faults == []
        relay.faults = [(429, {"Retry-After": "0.5"})] * 20
        with pytest.raises(TransientError) as waited:
            await embedder.embed(["the valve leaks"], InputType.DOCUMENT)
    assert waited.value.code == ErrorCode.UNAVAILABLE
    assert "answered 429 (too many requests)" in waited.value.reason
    assert 4 <= len(relay.asked) - 3 <= 6  # about 2 s of 0.5 s pauses, then handed back


async def test_a_server_down_slow_misconfigured_or_refusing_says_so_in_one_sentence(
    embeddings_server: str,
) -> None:
    down = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(RuntimeError, match="KBUS_EMBEDDER_OPENAI_DIMENSIONS"):
        _embedder(down)  # nothing to ask its vector length
    outages: list[TransientError] = []
    with pytest.raises(TransientError) as unreachable:
        await _embedder(down, dimensions=SERVER_DIMENSION).embed(["x"], InputType.QUERY)
    outages.append(unreachable.value)
    with (
        LLMRecorder(embeddings_server, delay_s=1.5) as slow,
        pytest.raises(TransientError) as timed_out,
    ):
        await _embedder(slow.url, dimensions=SERVER_DIMENSION, timeout_s=0.5).embed(
            ["x"], InputType.QUERY
        )
    outages.append(timed_out.value)
    with pytest.raises(TransientError) as wrong:
        await _embedder(embeddings_server, dimensions=384).embed(["x"], InputType.QUERY)
    outages.append(wrong.value)
    assert "answered 576-dimensional vectors where this model's are 384-dimensional" in str(
        wrong.value
    )
    with LLMRecorder(embeddings_server) as refusing:
        embedder = _embedder(refusing.url, dimensions=SERVER_DIMENSION)
        refusing.faults = [(401, {}), (503, {}), (400, {})]
        for _ in range(2):  # a bad key and a server error wait for the operator
            with pytest.raises(TransientError) as waiting:
                await embedder.embed(["x"], InputType.DOCUMENT)
            outages.append(waiting.value)
        with pytest.raises(PermanentError) as refused:  # the text itself: dead-lettered
            await embedder.embed(["x"], InputType.DOCUMENT)
    assert refused.value.code == ErrorCode.INVALID
    assert "refused the text (400)" in refused.value.reason
    for outage in outages:
        assert outage.code == ErrorCode.UNAVAILABLE
        assert outage.reason.startswith("the embeddings server at http://127.0.0.1:")
        assert "\n" not in outage.reason
        assert "Traceback" not in outage.reason
