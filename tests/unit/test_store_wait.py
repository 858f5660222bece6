"""A store query that does not answer in time fails as a retryable store error."""

from __future__ import annotations

import asyncio

import pytest
from kbus_contract.errors import ErrorCode, TransientError
from kbus_searcher.store.errors import within


async def test_a_query_past_its_wait_is_a_retryable_store_error() -> None:
    with pytest.raises(TransientError) as raised:
        await within(asyncio.sleep(5), 0.05)
    assert raised.value.code == ErrorCode.STORE_ERROR
    assert raised.value.retryable
    assert await within(asyncio.sleep(0, "answer"), 1.0) == "answer"
