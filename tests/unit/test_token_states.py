"""Token states packed for the store: int8 per token with its own scale."""

from __future__ import annotations

import numpy as np
import pytest
from kbus_models.encoder import Encoder, resolve
from kbus_reranker.scoring import MaxSimScorer
from kbus_runtime.token_states import pack, unpack

from tests.helpers import PASSAGES


def _unit(rows: int, dim: int, seed: int = 0) -> np.ndarray:
    states = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    unit: np.ndarray = states / np.linalg.norm(states, axis=1, keepdims=True)
    return unit


def test_a_packed_state_comes_back_within_half_a_step_of_its_token_scale() -> None:
    states = _unit(7, 16)
    back = unpack(pack(states), 16)

    assert back is not None
    assert back.shape == (7, 16)
    steps = np.abs(states).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(back - states) <= steps / 2 + 1e-7)
    assert len(pack(states)) == 7 * (4 + 16)


def test_a_token_of_zeros_is_kept_as_zeros() -> None:
    states = np.zeros((2, 4), dtype=np.float32)
    back = unpack(pack(states), 4)
    assert back is not None
    assert not back.any()


@pytest.mark.parametrize("value", [b"", b"\x00" * 21, b"\x00" * 19])
def test_a_value_of_another_shape_is_no_state(value: bytes) -> None:
    assert unpack(value, 16) is None


def test_one_pass_gives_the_vectors_and_the_token_states_of_separate_calls() -> None:
    encoder = Encoder(resolve("all-MiniLM-L6-v2"), threads=1)
    vectors, tokens = encoder.embed_with_tokens(PASSAGES, 2)

    assert np.allclose(vectors, encoder.embed(PASSAGES, 2), atol=1e-5)
    for together, alone in zip(tokens, encoder.token_vectors(PASSAGES, 1), strict=True):
        assert together.shape == alone.shape
        assert np.allclose(together, alone, atol=1e-4)


def test_maxsim_on_stored_states_keeps_the_encoded_scores_and_their_order() -> None:
    scorer = MaxSimScorer("all-MiniLM-L6-v2", threads=1, batch_size=2)
    query = "Does the receptor protect mice from obesity?"
    _, tokens = scorer.encoder.embed_with_tokens(PASSAGES, 2)
    stored = [unpack(pack(t), scorer.dimension) for t in tokens]

    encoded = scorer.score(query, PASSAGES)
    from_store = scorer.score_states(query, PASSAGES, stored)
    mixed = scorer.score_states(query, PASSAGES, [stored[0], None, stored[2]])

    assert np.allclose(from_store, encoded, atol=2e-3)
    assert list(np.argsort(from_store)) == list(np.argsort(encoded))
    assert mixed[1] == pytest.approx(encoded[1], abs=1e-5)


def test_maxsim_with_the_query_states_sent_encodes_nothing_and_keeps_the_scores() -> None:
    scorer = MaxSimScorer("all-MiniLM-L6-v2", threads=1, batch_size=2)
    query = "Does the receptor protect mice from obesity?"
    _, tokens = scorer.encoder.embed_with_tokens(PASSAGES, 2)
    stored = [unpack(pack(t), scorer.dimension) for t in tokens]
    [sent] = scorer.encoder.token_vectors([query])
    query_states = unpack(pack(sent), scorer.dimension)
    assert query_states is not None

    encoded = scorer.score(query, PASSAGES)
    given = scorer.score_states(query, PASSAGES, stored, query_states)
    mixed = scorer.score_states(query, PASSAGES, [stored[0], None, stored[2]], query_states)

    assert np.allclose(given, encoded, atol=2e-3)
    assert list(np.argsort(given)) == list(np.argsort(encoded))
    assert np.array_equal(scorer.maxsim(query_states, [s for s in stored if s is not None]), given)
    assert mixed[1] == pytest.approx(encoded[1], abs=2e-3)


async def test_a_query_s_vector_and_token_states_come_from_one_urgent_pass() -> None:
    encoder = Encoder(resolve("all-MiniLM-L6-v2"), threads=1, lone_threads=2)
    query = ["where is the boiler room key?"]

    vectors, [states] = await encoder.embed_with_tokens_async(query, urgent=True)

    assert np.allclose(vectors, encoder.embed(query), atol=1e-5)
    assert np.allclose(states, encoder.token_vectors(query)[0], atol=1e-4)
