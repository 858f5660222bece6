"""FastStream's per-message lines are DEBUG lines, shown only when a service logs at DEBUG."""

from __future__ import annotations

import logging

import pytest
from kbus_runtime.bus import Refusals, make_broker
from kbus_runtime.settings import BusSettings
from prometheus_client import CollectorRegistry


@pytest.mark.parametrize(("service_level", "logger_level"), [("INFO", 20), ("debug", 10)])
def test_message_lines_are_debug_and_the_logger_follows_the_service(
    service_level: str, logger_level: int
) -> None:
    broker = make_broker(BusSettings(), CollectorRegistry(), "test", log_level=service_level)
    state = broker.config.logger
    assert state.log_level == logging.DEBUG
    assert getattr(state.params_storage, "logger_log_level", None) == logger_level


def test_a_refusal_is_logged_once_per_cause_and_other_errors_pass_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refusals = Refusals()
    refused = Exception('nats: permissions violation for publish to "kb.search.t2._all"')
    with caplog.at_level(logging.WARNING, logger="kbus_runtime.bus"):
        assert refusals.handled(refused)
        assert refusals.handled(refused)
        assert not refusals.handled(Exception("nats: connection closed"))
    assert refusals.seen == {'permissions violation for publish to "kb.search.t2._all"': 2}
    assert [r.getMessage().count("kb.search.t2._all") for r in caplog.records] == [1]
