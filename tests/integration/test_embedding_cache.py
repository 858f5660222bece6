"""The embedding cache on a real NATS: batched reads, unacknowledged writes, older buckets."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from kbus_contract.topology import Topology
from kbus_embedder.caching import EmbeddingCache
from kbus_runtime.keyed_cache import cache_key
from nats.aio.client import Client

MODEL = "test-model"
DIMENSION = 8


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((n, DIMENSION), dtype=np.float32)


def _count_api_calls(nc: Client, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The JetStream API subjects the (real) connection sends to from now on."""
    sent: list[str] = []
    publish, request = nc.publish, nc.request

    async def counted_publish(subject: str, payload: bytes = b"", **kwargs: Any) -> None:
        if subject.startswith("$JS.API."):
            sent.append(subject)
        await publish(subject, payload, **kwargs)

    async def counted_request(subject: str, payload: bytes = b"", **kwargs: Any) -> Any:
        if subject.startswith("$JS.API."):
            sent.append(subject)
        return await request(subject, payload, **kwargs)

    monkeypatch.setattr(nc, "publish", counted_publish)
    monkeypatch.setattr(nc, "request", counted_request)
    return sent


async def test_vectors_come_back_as_written_and_unknown_texts_are_missing(
    nc: Client, topology: Topology
) -> None:
    cache = EmbeddingCache(topology.embed_cache_kv)
    await cache.open(nc, create=True)
    texts = [f"chunk {i}" for i in range(40)]
    vectors = _vectors(40)
    await cache.put_many(MODEL, texts, vectors)

    asked = [*texts[:30], "never written", texts[0]]
    found = await cache.get_many(MODEL, asked, DIMENSION)

    for i in range(30):
        vector = found[i]
        assert vector is not None
        np.testing.assert_array_equal(vector, vectors[i])
    assert found[30] is None
    np.testing.assert_array_equal(found[31], vectors[0])
    # Another model's key for the same text is another entry.
    assert await cache.get_many("other-model", texts[:3], DIMENSION) == [None] * 3


async def test_a_message_reads_all_its_keys_in_one_request(
    nc: Client, topology: Topology, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = EmbeddingCache(topology.embed_cache_kv)
    await cache.open(nc, create=True)
    texts = [f"text {i}" for i in range(64)]
    await cache.put_many(MODEL, texts[:32], _vectors(32))
    sent = _count_api_calls(nc, monkeypatch)

    found = await cache.get_many(MODEL, texts, DIMENSION)

    assert sum(v is not None for v in found) == 32
    assert sent == [f"$JS.API.DIRECT.GET.KV_{topology.embed_cache_bucket}"]


async def test_a_bucket_declared_without_direct_reads_gets_them(
    nc: Client, topology: Topology, monkeypatch: pytest.MonkeyPatch
) -> None:
    js = nc.jetstream()
    await js.create_key_value(replace(topology.embed_cache_kv, direct=False))
    key = cache_key(MODEL, "kept")
    await (await js.key_value(topology.embed_cache_bucket)).put(key, _vectors(1)[0].tobytes())
    cache = EmbeddingCache(topology.embed_cache_kv)
    await cache.open(nc, create=True)

    info = await js.stream_info(f"KV_{topology.embed_cache_bucket}")
    assert info.config.allow_direct
    sent = _count_api_calls(nc, monkeypatch)
    [vector] = await cache.get_many(MODEL, ["kept"], DIMENSION)
    assert vector is not None  # the data is still there
    assert sent == [f"$JS.API.DIRECT.GET.KV_{topology.embed_cache_bucket}"]


async def test_a_full_bucket_is_reported_not_raised(
    nc: Client, topology: Topology, caplog: pytest.LogCaptureFixture
) -> None:
    cache = EmbeddingCache(replace(topology.embed_cache_kv, max_bytes=4 * 1024))
    await cache.open(nc, create=True)
    texts = [f"long text {i}" for i in range(64)]

    with caplog.at_level(logging.WARNING, logger="kbus.cache"):
        await cache.put_many(MODEL, texts, _vectors(64))  # about 20 fit

    assert "embedding cache: writing 64 values failed" in caplog.text
    found = await cache.get_many(MODEL, texts, DIMENSION)
    assert 0 < sum(v is not None for v in found) < 64
