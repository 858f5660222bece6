"""A publish the stream did not acknowledge is sent again, the same message, within a bound."""

from __future__ import annotations

import pytest
from kbus_contract.wire import DUPLICATE_IN_PROCESS, until_acknowledged
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.errors import APIError, NoStreamResponseError, ServiceUnavailableError


class Stream:
    """Fails the first publishes as a stream between leaders does, then stores."""

    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.sent: list[dict[str, str]] = []

    async def publish(self, headers: dict[str, str]) -> str:
        self.sent.append(dict(headers))
        if self.failures:
            raise self.failures.pop(0)
        return "stored"


async def test_a_timed_out_or_leaderless_publish_is_sent_again_with_the_same_id() -> None:
    failures: list[Exception] = [
        NatsTimeoutError(),
        NoRespondersError(),
        NoStreamResponseError(),
        ServiceUnavailableError(),
        # The resend reached a server still storing the first copy.
        APIError(code=409, err_code=DUPLICATE_IN_PROCESS),
    ]
    stream = Stream(failures)
    headers = {"Nats-Msg-Id": "t/l/doc/v1"}
    assert await until_acknowledged(lambda: stream.publish(headers), bound_s=5) == "stored"
    assert stream.sent == [headers] * 6


async def test_the_last_failure_is_raised_when_the_bound_passes() -> None:
    stream = Stream([NoRespondersError()] * 100)
    with pytest.raises(NoRespondersError):
        await until_acknowledged(lambda: stream.publish({}), bound_s=0.3)
    assert 2 <= len(stream.sent) < 100


async def test_other_errors_are_not_retried() -> None:
    stream = Stream([ValueError("bad subject")])
    with pytest.raises(ValueError, match="bad subject"):
        await until_acknowledged(lambda: stream.publish({}), bound_s=5)
    assert len(stream.sent) == 1
    wrong = Stream([APIError(code=400, err_code=10060)])  # another refusal of the stream's
    with pytest.raises(APIError):
        await until_acknowledged(lambda: wrong.publish({}), bound_s=5)
    assert len(wrong.sent) == 1
