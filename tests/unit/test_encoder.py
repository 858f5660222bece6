"""The local encoder runs the packaged weights correctly, without PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
from kbus_models.encoder import MINILM, MINILM_INT8, Encoder, resolve

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "A man is riding a horse.",
    "A woman is playing violin.",
]


@pytest.fixture(scope="module")
def fp32() -> Encoder:
    return Encoder(resolve(MINILM), threads=1)


def test_vectors_are_unit_length_and_in_order(fp32: Encoder) -> None:
    vectors = fp32.embed([*SENTENCES, "x" * 5000])
    assert vectors.shape == (5, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(fp32.embed([SENTENCES[2]])[0], vectors[2], atol=1e-5)


def test_matches_the_published_similarity(fp32: Encoder) -> None:
    # sentence-transformers' documentation shows 0.7553 for this pair with all-MiniLM-L6-v2.
    a, b, _, violin = fp32.embed(SENTENCES)
    assert float(a @ b) == pytest.approx(0.7553, abs=0.001)
    assert float(a @ violin) < 0.1


def test_fp32_graph_agrees_with_the_independent_int8_export(fp32: Encoder) -> None:
    int8 = Encoder(resolve(MINILM_INT8), threads=1)
    agreement = (fp32.embed(SENTENCES) * int8.embed(SENTENCES)).sum(axis=1)
    assert agreement.min() > 0.99


def test_unknown_model_names_say_what_is_known() -> None:
    with pytest.raises(FileNotFoundError, match=MINILM):
        resolve("no-such-model")
