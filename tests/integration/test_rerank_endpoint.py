"""The endpoint reranker against a rerank server on loopback (``kbus_dev.rerank_server``: the
packaged MiniLM behind Cohere's and Text Embeddings Inference's ``/rerank`` shapes), reached
directly or through a relay that holds, refuses or overloads it. Its scores are the server's,
one per candidate in the candidates' order, whatever order the server answers in; each failure
is an outage a search goes on without (``unavailable``), or a refusal."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from kbus_contract.errors import ErrorCode, PermanentError, TransientError
from kbus_dev.rerank_server import MODEL, start_rerank_server
from kbus_dev.servers import free_port
from kbus_reranker.endpoint import EndpointScorer
from kbus_reranker.scoring import EncoderScorer
from kbus_reranker.settings import RerankEndpointSettings

from tests.helpers import HOUSEHOLD_WORDS as WORDS
from tests.helpers import LLMRecorder


@pytest.fixture(scope="module")
def rerank_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = start_rerank_server(tmp_path_factory.mktemp("rerank"))
    try:
        yield f"http://127.0.0.1:{server.ports['http']}"
    finally:
        server.stop()


def _scorer(url: str, **fields: object) -> EndpointScorer:
    return EndpointScorer(RerankEndpointSettings(url=url, model=MODEL).model_copy(update=fields))


@pytest.mark.parametrize("api", ["cohere", "tei"])
def test_each_candidate_gets_the_server_s_score_in_its_own_place(
    rerank_server: str, api: str
) -> None:
    """Random queries against random candidates (the server answers best first): each score
    is the one the same model gives that candidate here."""
    rng = random.Random(72)
    local = EncoderScorer(MODEL, threads=1)
    scorer = _scorer(rerank_server + ("/v1" if api == "cohere" else ""), api=api)
    for _ in range(8):
        query = " ".join(rng.choices(WORDS, k=rng.randint(1, 4)))
        passages = [
            " ".join(rng.choices(WORDS, k=rng.randint(1, 12))) for _ in range(rng.randint(1, 9))
        ]
        scores = scorer.score(query, passages)
        assert scores.shape == (len(passages),)
        assert np.allclose(scores, local.score(query, passages), atol=1e-4), (query, passages)
    assert scorer.score("anything", []).shape == (0,)


def test_an_overloaded_server_is_waited_out_briefly_then_an_outage(rerank_server: str) -> None:
    with LLMRecorder(rerank_server + "/v1") as relay:
        scorer = _scorer(relay.url, rate_limit_wait_s=1.0)
        relay.faults = [(429, {"Retry-After": "0.2"}), (429, {})]
        assert scorer.score("pump", ["the pump primes", "a rake"]).shape == (2,)
        assert len(relay.asked) == 3
        assert relay.faults == []
        relay.faults = [(429, {"Retry-After": "0.3"})] * 20
        with pytest.raises(TransientError) as waited:
            scorer.score("valve", ["the valve leaks"])
    assert waited.value.code == ErrorCode.UNAVAILABLE
    assert "answered 429 (too many requests)" in waited.value.reason
    assert 2 <= len(relay.asked) - 3 <= 5  # about a second of 0.3 s pauses, then given up
    assert "KBUS_RERANKER" not in waited.value.reason


def test_a_server_down_slow_misconfigured_or_refusing_says_so_in_one_sentence(
    rerank_server: str, tmp_path: Path
) -> None:
    outages: list[TransientError] = []
    down = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(TransientError) as unreachable:
        _scorer(down).score("x", ["y"])
    outages.append(unreachable.value)
    with (
        LLMRecorder(rerank_server + "/v1", delay_s=1.0) as slow,
        pytest.raises(TransientError) as timed_out,
    ):
        _scorer(slow.url, timeout_s=0.3).score("x", ["y"])
    outages.append(timed_out.value)
    with pytest.raises(TransientError) as other_shape:  # a TEI server asked in Cohere's shape
        _scorer(rerank_server, api="cohere").score("x", ["y"])
    outages.append(other_shape.value)
    assert "(422" in other_shape.value.reason
    assert "_API" in other_shape.value.reason
    with LLMRecorder(rerank_server + "/v1") as refusing:
        scorer = _scorer(refusing.url)
        refusing.faults = [(401, {}), (503, {}), (400, {}), (413, {})]
        for _ in range(3):  # a key, a server or a shape to be put right: not the request's
            with pytest.raises(TransientError) as waiting:
                scorer.score("x", ["y"])
            outages.append(waiting.value)
        with pytest.raises(PermanentError) as refused:
            scorer.score("x", ["y"])
    assert refused.value.code == ErrorCode.TOO_MANY_CANDIDATES
    for outage in outages:
        assert outage.code == ErrorCode.UNAVAILABLE
        assert outage.reason.startswith("the rerank server at http://127.0.0.1:"), outage.reason
        assert "\n" not in outage.reason
        assert "Traceback" not in outage.reason
