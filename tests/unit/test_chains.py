"""A search's chain: the transformer and reranker its libraries' profiles name, what the
request overrides, and how the second stage answers when a prompted reranker cannot judge."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from kbus_contract import (
    DegradedReason,
    LibraryProfile,
    RerankCandidate,
    RerankerKind,
    Reranking,
    RerankReply,
    RerankRequest,
    SearchRequest,
    Transformer,
    TransformerKind,
)
from kbus_contract.errors import PermanentError, TransientError
from kbus_contract.topology import Topology
from kbus_reranker.prompting import PromptedScorer
from kbus_reranker.reranking import Reranker
from kbus_runtime.chat import MalformedAnswerError
from kbus_runtime.deadlines import Deadline
from kbus_searcher.search.chains import Chain, chain_of
from kbus_searcher.search.second_stage import SecondStage
from kbus_searcher.settings import SearcherSettings
from kbus_searcher.state.profiles import _parsed
from kbus_searcher.store import Candidate
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

PRODUCTS = LibraryProfile(
    transformer=Transformer(kind=TransformerKind.PROMPT, prompt="Describe the product wanted."),
    reranker=Reranking(kind=RerankerKind.PROMPTED, instruction="The same product.", depth=8),
)


def _request(**extra: Any) -> SearchRequest:
    return SearchRequest(tenant="t", libraries=("a", "b"), query="q", **extra)


def test_a_profile_names_the_chain_and_the_request_overrides_it() -> None:
    chain = chain_of(_request(), [PRODUCTS, PRODUCTS], rewrite=False)
    assert chain == Chain(
        TransformerKind.PROMPT,
        "Describe the product wanted.",
        RerankerKind.PROMPTED,
        "The same product.",
        8,
    )
    asked = chain_of(_request(transformer="question"), [PRODUCTS], rewrite=False)
    assert (asked.transformer, asked.prompt) == (TransformerKind.QUESTION, None)
    assert chain_of(_request(rewrite=False), [PRODUCTS], rewrite=True).transformer == "none"


def test_libraries_that_disagree_get_the_server_s_default() -> None:
    chain = chain_of(_request(), [PRODUCTS, LibraryProfile()], rewrite=False)
    assert chain == Chain()
    assert chain_of(_request(), [LibraryProfile()], rewrite=True).transformer == "question"
    assert chain_of(_request(rewrite=True), [LibraryProfile()], rewrite=False).transformer == (
        "question"
    )


def test_the_prompt_transformer_needs_a_prompt_the_libraries_share() -> None:
    with pytest.raises(PermanentError) as info:
        chain_of(_request(transformer="prompt"), [PRODUCTS, LibraryProfile()], rewrite=False)
    assert info.value.code == "no_prompt"


@pytest.mark.parametrize(
    ("link", "value"),
    [
        (Transformer, {"kind": "prompt"}),
        (Transformer, {"kind": "question", "prompt": "x"}),
        (Reranking, {"kind": "prompted"}),
        (Reranking, {"kind": "default", "instruction": "x"}),
        (Reranking, {"kind": "prompted", "instruction": "x" * 2_001}),
        (Reranking, {"kind": "llm"}),
    ],
)
def test_a_link_without_its_instruction_or_with_a_stray_one_is_refused(
    link: type[Transformer | Reranking], value: dict[str, str]
) -> None:
    with pytest.raises(ValidationError):
        link.model_validate(value)


class Bus:
    """Answers kb.rerank with an error, or scores; records the requests."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.asked: list[RerankRequest] = []
        self.topology = Topology()

    async def ask(self, subject: str, payload: Any, reply: Any, *, stage: str, timeout_s: float):  # type: ignore[no-untyped-def]
        self.asked.append(payload)
        if self.error is not None:
            raise self.error
        return RerankReply(model="prompted:m", scores=tuple(0.5 for _ in payload.candidates))


async def _rerank(bus: Bus, chain: Chain, rerank: bool | None = None) -> Any:
    second = SecondStage(bus, SearcherSettings())  # type: ignore[arg-type]
    found = [
        Candidate(f"id{i}", {"title": "", "heading_path": [], "text": "t"}, 1, 1, 1)
        for i in range(12)
    ]
    deadline = Deadline.after(10_000, time.monotonic())
    return await second.rerank(_request(rerank=rerank), chain, "q", found, deadline)


async def test_a_prompted_chain_sends_its_instruction_and_depth() -> None:
    bus = Bus()
    chain = chain_of(_request(), [PRODUCTS], rewrite=False)
    reranked = await _rerank(bus, chain)
    assert reranked.scores == [0.5] * 8
    assert bus.asked[0].instruction == "The same product."
    assert bus.asked[0].query_states is None


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (PermanentError("says perhaps", code="rerank_malformed"), DegradedReason.RERANK_MALFORMED),
        (PermanentError("no model", code="rerank_unconfigured"), DegradedReason.RERANK_UNAVAILABLE),
        (TransientError("down", code="unavailable"), DegradedReason.RERANK_UNAVAILABLE),
        (TransientError("slow", code="reranker_timeout"), DegradedReason.RERANK_TIMEOUT),
    ],
)
async def test_a_reranker_that_cannot_judge_leaves_the_first_stage_order(
    error: Exception, reason: DegradedReason
) -> None:
    reranked = await _rerank(Bus(error), Chain(reranker=RerankerKind.PROMPTED, instruction="i"))
    assert (reranked.scores, reranked.degraded) == (None, reason)
    with pytest.raises(type(error)):  # unless the request insisted on reranking
        await _rerank(Bus(error), Chain(), rerank=True)


async def test_a_request_the_reranker_refuses_is_an_error_not_a_degraded_answer() -> None:
    with pytest.raises(PermanentError):
        await _rerank(Bus(PermanentError("too many", code="too_many_candidates")), Chain())


NO_RERANKER = LibraryProfile(reranker=Reranking(kind=RerankerKind.NONE))


async def test_a_profile_without_reranker_is_not_reranked_unless_asked() -> None:
    bus = Bus()
    none = chain_of(_request(), [NO_RERANKER], rewrite=False)
    asked = chain_of(_request(rerank=True), [NO_RERANKER], rewrite=False)
    assert (await _rerank(bus, none)).scores is None
    assert (await _rerank(bus, asked, rerank=True)).scores == [0.5] * 5
    assert len(bus.asked) == 1


def test_the_query_s_token_states_are_asked_for_only_where_the_reranker_reads_them() -> None:
    def chain(profile: LibraryProfile, **asked: Any) -> Chain:
        return chain_of(_request(**asked), [profile], rewrite=False)

    assert chain(LibraryProfile()).query_states
    assert not chain(PRODUCTS).query_states  # the prompted reranker reads only the text
    assert not chain(LibraryProfile(), rerank=False).query_states
    assert not chain(NO_RERANKER).query_states
    assert not chain_of(_request(), [LibraryProfile()], rewrite=False, rerank=False).query_states


class Judge:
    """A chat model that judges by a word in the passage, or answers off form."""

    name = "test/judge"

    async def chat(self, instruction: str, message: str, *, max_tokens: int) -> str:
        raise NotImplementedError

    async def choose(
        self, instruction: str, message: str, options: Sequence[str]
    ) -> dict[str, float]:
        assert "The same product." in instruction
        if "odd" in message:
            raise MalformedAnswerError("it answered 'perhaps'")
        return {"yes": 0.9, "no": 0.1} if "boot" in message else {"yes": 0.2, "no": 0.8}


async def test_the_prompted_scorer_gives_p_yes_and_refuses_an_answer_off_form() -> None:
    scorer = PromptedScorer(Judge(), concurrency=2, max_passage_chars=100)
    scores = await scorer.score("The same product.", "warm feet", ["a boot", "a sock"])
    np.testing.assert_allclose(scores, [0.9, 0.2], rtol=1e-6)
    assert scorer.name == "prompted:test/judge"
    with pytest.raises(PermanentError) as info:
        await scorer.score("The same product.", "warm feet", ["a boot", "odd"])
    assert info.value.code == "rerank_malformed"


def test_a_rerank_request_s_instruction_is_bounded() -> None:
    candidate = RerankCandidate(id="1", text="t")
    with pytest.raises(ValidationError):
        RerankRequest(query="q", candidates=(candidate,), instruction="x" * 2_001)


def test_a_profile_kept_around_the_ingestor_that_is_not_valid_searches_with_the_defaults() -> None:
    assert _parsed(PRODUCTS.model_dump_json().encode()) == PRODUCTS
    assert _parsed(b'{"reranker": {"kind": "prompted"}}') is None
    assert _parsed(b"not json") is None


async def test_the_prompted_reranker_answers_the_model_s_own_scores_under_its_name() -> None:
    reranker = Reranker(
        None,  # type: ignore[arg-type]
        lambda: None,  # type: ignore[arg-type, return-value]
        max_candidates=10,
        registry=CollectorRegistry(),
        prompted=PromptedScorer(Judge(), concurrency=1, max_passage_chars=100),
    )
    keyword = [RerankCandidate(id="a", text="a boot"), RerankCandidate(id="b", text="a sock")]
    plain = await reranker.rerank(
        RerankRequest(query="warm feet", candidates=tuple(keyword), instruction="The same product.")
    )
    assert plain.model == "prompted:test/judge"
    assert plain.scores == pytest.approx((0.9, 0.2))
