"""The local encoder runs the packaged weights correctly, without PyTorch."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from kbus_models.encoder import (
    MAX_PADDING,
    MINILM,
    MINILM_INT8,
    MINILM_Q8,
    Encoder,
    padding_bounded,
    resolve,
)

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


def test_batches_group_texts_of_equal_token_counts(fp32: Encoder) -> None:
    # By characters the 17-token texts (29 characters) come before the 14-token ones (38, 62),
    # and batches of four would pad 3 tokens to 12 and 14 to 17.
    texts = [
        "one two three four five six seven eight nine ten eleven twelve",  # 62 characters, 14
        "a b c d e f g h i j",  # 19, 12
        "hello",  # 5, 3
        "1 2 3 4 5 6 7 8 9 0 1 2 3 4 5",  # 29, 17
        "supercalifragilisticexpialidociousness",  # 38, 14
        "k l m n o p q r s t",  # 19, 12
        "1 2 3 4 5 6 7 8 9 0 1 2 3 4 6",  # 29, 17
        "world",  # 5, 3
    ]
    tokens = [len(fp32.tokenizer.encode(t).ids) for t in texts]
    submitted = fp32._submit(texts, 4, False)
    for _, future in submitted:
        future.result()
    batches = [sorted(tokens[i] for i in rows) for rows, _ in submitted]
    assert batches == [[3, 3], [12, 12], [14, 14], [17, 17]]


def test_a_batch_grows_while_its_padding_stays_within_the_bound() -> None:
    lengths = [100, 100, 101, 101, 130, 130, 130, 130, 130, 131, 200]
    order = list(range(len(lengths)))
    batches = padding_bounded(order, lengths, 4)
    assert [[lengths[i] for i in b] for b in batches] == [
        [100, 100, 101, 101],  # 404 positions for 402 tokens
        [130, 130, 130, 130],  # full: a fifth would exceed the size
        [130, 131],
        [200],  # would pad the 130s by half
    ]
    for batch in batches:
        padded = max(lengths[i] for i in batch) * len(batch)
        assert padded <= sum(lengths[i] for i in batch) * (1 + MAX_PADDING)
    assert padding_bounded(order, lengths, 4, max_padding=1.0)[0] == [0, 1, 2, 3]
    assert padding_bounded([], [], 4) == []


def test_batches_on_several_threads_give_each_text_its_own_row(fp32: Encoder) -> None:
    # Lengths out of order, so the batches (sorted by length) mix the rows of the call.
    texts = [
        " ".join([word] * n)
        for n, word in zip([9, 1, 30, 4, 17, 2, 25, 6, 12, 3, 40], "abcdefghijk", strict=True)
    ]
    several = Encoder(fp32.spec, threads=3)
    together = several.embed(texts, batch_size=2)
    alone = np.stack([fp32.embed([t])[0] for t in texts])
    assert np.abs(together - alone).max() < 1e-5
    tokens = several.token_vectors(texts, batch_size=3)
    assert [len(t) for t in tokens] == [len(fp32.tokenizer.encode(t).ids) for t in texts]


async def test_awaited_on_an_event_loop_it_gives_the_same_rows(fp32: Encoder) -> None:
    several = Encoder(fp32.spec, threads=2)
    texts = [*SENTENCES, "x" * 5000, "a b"]
    vectors, tokens = await several.embed_with_tokens_async(texts, batch_size=2)
    assert np.abs(vectors - fp32.embed(texts)).max() < 1e-5
    for awaited, alone in zip(tokens, fp32.token_vectors(texts), strict=True):
        assert np.allclose(awaited, alone, atol=1e-4)


def test_matches_the_published_similarity(fp32: Encoder) -> None:
    # sentence-transformers' documentation shows 0.7553 for this pair with all-MiniLM-L6-v2.
    a, b, _, violin = fp32.embed(SENTENCES)
    assert float(a @ b) == pytest.approx(0.7553, abs=0.001)
    assert float(a @ violin) < 0.1


def test_fp32_graph_agrees_with_the_independent_int8_export(fp32: Encoder) -> None:
    int8 = Encoder(resolve(MINILM_INT8), threads=1)
    agreement = (fp32.embed(SENTENCES) * int8.embed(SENTENCES)).sum(axis=1)
    assert agreement.min() > 0.99


def test_the_quantized_model_stays_close_to_fp32_and_keeps_its_neighbours(fp32: Encoder) -> None:
    q8 = Encoder(resolve(MINILM_Q8), threads=1)
    assert q8.spec.name == MINILM_Q8
    assert q8.session.get_outputs()[0].shape[-1] == 384
    # The graph really is quantized: int8 matrix products, not the fp32 graph under a new name.
    assert any(
        node.op_type in ("MatMulInteger", "DynamicQuantizeMatMul") for node in _graph(q8).graph.node
    )
    vectors = q8.embed(SENTENCES)
    agreement = (fp32.embed(SENTENCES) * vectors).sum(axis=1)
    assert agreement.min() > 0.98
    assert agreement.max() < 0.99999  # not the fp32 session under another name
    a, b, _, violin = vectors
    assert float(a @ b) == pytest.approx(0.7553, abs=0.02)
    assert float(a @ violin) < 0.1


def _graph(encoder: Encoder) -> Any:
    import onnx
    from kbus_models.bert_onnx import build_bert_onnx
    from kbus_models.quantizing import quantize_int8

    return onnx.load_from_string(quantize_int8(build_bert_onnx(encoder.spec.directory)))


def test_unknown_model_names_say_what_is_known() -> None:
    with pytest.raises(FileNotFoundError, match=MINILM_Q8):
        resolve("no-such-model")


def test_a_lone_text_runs_in_its_own_session_and_never_waits_for_the_batches(
    fp32: Encoder,
) -> None:
    lone = Encoder(fp32.spec, threads=1, lone_threads=2)
    shared = Encoder(fp32.spec, threads=1, lone_threads=1)
    gate = threading.Event()
    # The one batch thread of each encoder is busy (a document batch that takes long).
    busy = [lone._pool.submit(gate.wait), shared._pool.submit(gate.wait)]
    with ThreadPoolExecutor(2) as callers:
        waiting = callers.submit(shared.embed, [SENTENCES[0]])
        vector = callers.submit(lone.embed, [SENTENCES[0]]).result(timeout=30)
        assert not waiting.done()  # without its own session a query waits for the batch
        gate.set()
        assert np.abs(waiting.result(timeout=30) - vector).max() < 1e-5
    for call in busy:
        call.result()
    assert np.abs(vector[0] - fp32.embed(SENTENCES)[0]).max() < 1e-5
