"""Embedder settings (env prefix ``KBUS_EMBEDDER_``)."""

from __future__ import annotations

from typing import Literal

from kbus_shared.settings import CohereSettings, ServiceSettings
from pydantic import Field
from pydantic_settings import SettingsConfigDict


class EmbedderSettings(ServiceSettings):
    """Which model embeds, and how much work is done at once."""

    model_config = SettingsConfigDict(env_prefix="KBUS_EMBEDDER_", extra="ignore")

    http_port: int = Field(default=8102, description="Port of /health and /metrics.")
    backend: Literal["auto", "local", "cohere"] = Field(
        default="auto", description="auto: Cohere when a Cohere key is set, else local."
    )
    model: str = Field(
        default="all-MiniLM-L6-v2",
        description="A model that ships in a package (all-MiniLM-L6-v2: fp32; "
        "all-MiniLM-L6-v2-q8: the same weights quantized to int8 on load, 1.33x (AVX2) to 1.67x "
        "(AVX-512) the fp32 encode rate, SciFact nDCG@10 within 0.002 of fp32; "
        "all-MiniLM-L6-v2-int8) or a directory with "
        "tokenizer.json and model.onnx or model.safetensors. Another model means re-embedding "
        "every document (docs/reliability.md).",
    )
    threads: int = Field(
        default=0,
        ge=0,
        description="Batches encoded at once, each on one core (0: one per core this process "
        "may use).",
    )
    query_threads: int = Field(
        default=0,
        ge=0,
        description="Cores a request for one text (a query) runs on, in a second model session "
        "with its own thread, so it never waits for a document batch (0: one per core this "
        "process may use; 1: no second session, the query runs on one core with the batches). "
        "all-MiniLM-L6-v2 on two cores: a query while documents are embedded 9.4 instead of "
        "36.9 ms p50, kb.embed on an idle embedder 5.5 instead of 6.8 ms; about 100 MB more "
        "resident.",
    )
    batch_size: int = Field(
        default=4,
        gt=0,
        description="Texts per onnxruntime run at most; a run ends earlier where the next text "
        "would pad it by more than 2%. Small batches were fastest on two cores "
        "(all-MiniLM-L6-v2, 512-character chunks, side by side: 2 1.01x the rate of 4, 8 0.92x, "
        "16 0.90x).",
    )
    gather: int = Field(
        default=64,
        gt=0,
        description="Texts gathered across chunks.ready messages, sorted by token count, then run "
        "batch_size at a time.",
    )
    flush_ms: float = Field(
        default=10.0,
        ge=0.0,
        description="How long a document's chunks wait for other messages' chunks to fill a "
        "model call.",
    )
    concurrency: int = Field(
        default=64,
        ge=1,
        description="chunks.ready messages held at once; their chunks share model calls. Enough "
        "for two full calls of `gather` texts (one running, the next queued) at a few chunks per "
        "message: with 8 (about 31 chunks of SciFact) every call waited for its deadline short of "
        "`gather` and the encoder idled between calls. Side by side on 1,000 SciFact documents: "
        "the embedder draining them 118-125 chunks/s with 8, 133-137 with 64 (three rounds); the "
        "whole pipeline 96-105 against 102-113 (two rounds).",
    )
    request_concurrency: int = Field(
        default=8,
        ge=1,
        description="kb.embed requests answered at once. A local query embedding runs on one "
        "core, so two run side by side on two cores and more wait at the encoder; with Cohere "
        "the requests' network calls overlap.",
    )
    include_title: bool = Field(
        default=True, description="Embed a chunk as 'title / heading path / text'."
    )
    cache: bool = Field(
        default=True,
        description="Keep vectors in a JetStream KV bucket by model and text hash, so unchanged "
        "text is never embedded twice.",
    )
    cache_max_bytes: int = Field(
        default=1024**3, gt=0, description="Size limit of the embedding cache bucket."
    )
    cohere: CohereSettings = Field(default_factory=CohereSettings)
