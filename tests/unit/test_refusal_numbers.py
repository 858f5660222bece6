"""The gate's refusals carry kbus's error code twice: first in the description, and as a number
(``err_code``, JetStream's field). Clients and gateways of different versions read each other's:
a number once given never changes, and a refusal reads back as the code it says."""

from __future__ import annotations

import random

from kbus_contract.errors import ErrorCode
from kbus_contract.intake import REFUSAL_BASE, refusal_code, refusal_number, refused

#: Every code in the order it was released: its place is its number on the wire.
RELEASED = (
    "error", "invalid", "unavailable", "invalid_message", "tenant_mismatch", "library_mismatch",
    "library_not_granted", "principal_not_granted", "read_only", "quota_exceeded", "too_large",
    "too_many_candidates", "bad_cursor", "bad_profile", "no_prompt", "body_missing",
    "body_mismatch", "bad_listing", "empty_document", "unreadable", "encrypted", "invalid_text",
    "content_type_mismatch", "unsupported_content_type", "template_mismatch", "parse_timeout",
    "address_refused", "robots_disallowed", "too_many_redirects", "fetch_failed", "cohere",
    "bad_vector", "model_mismatch", "bad_reply", "malformed_answer", "generation_malformed",
    "rerank_malformed", "rerank_unconfigured", "bus_error", "store_error", "store_rejected",
    "store_write_failed", "not_ready", "max_deliveries", "deadline_exceeded",
    "ingestor_unavailable", "ingestor_timeout", "embedder_unavailable", "embedder_timeout",
    "searcher_unavailable", "searcher_timeout", "reranker_unavailable", "reranker_timeout",
    "generator_unavailable", "generator_timeout", "internal", "permission_denied",
)  # fmt: skip


def test_a_code_s_number_never_changes_and_every_code_has_one() -> None:
    for place, code in enumerate(RELEASED):
        assert refusal_number(code) == REFUSAL_BASE + place, code
    assert [code.value for code in ErrorCode][: len(RELEASED)] == list(RELEASED)
    assert len(ErrorCode) == len(RELEASED), "a new code: append it to RELEASED"


def test_a_refusal_reads_back_as_the_code_it_says_whatever_its_number() -> None:
    """Random codes with random numbers (a gateway of another version numbering otherwise):
    the description's code wins; without one, the number's; without either, bus_error."""
    rng = random.Random(59)
    codes = [code.value for code in ErrorCode]
    for _ in range(2_000):
        code = rng.choice(codes)
        number = rng.choice([refusal_number(code), rng.randint(0, 30_000), None])
        assert refusal_code(number, f"{code}: the reason") == code
        sent = refused(code, "the reason").error
        assert refusal_code(sent.err_code, sent.description) == code
        assert refusal_code(refusal_number(code), "no code here") == code
        assert refusal_code(None, "no code here") == ErrorCode.BUS_ERROR
