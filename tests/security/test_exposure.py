"""What kbus exposes beyond the bus (issue 55, finding 11): the demo's servers take no one
without a key on any interface they listen on, and a caller's trace context never decides
what a service records."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import weaviate
from kbus_dev import stack
from kbus_dev.servers import Server, free_port
from kbus_runtime.tracing import TracingSettings, start_tracing
from opentelemetry import propagate, trace

#: A caller's trace context asking to be recorded, with a trace id a ratio sampler always takes.
SAMPLED = "00-00000000000000000000000000000001-0000000000000001-01"


@pytest.fixture
def demo_servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """The demo's NATS and Weaviate, as ``make demo`` starts them (on free ports)."""
    monkeypatch.setattr(stack, "NATS_PORT", free_port())
    monkeypatch.setattr(stack, "WEAVIATE_HTTP", free_port())
    monkeypatch.setattr(stack, "WEAVIATE_GRPC", free_port())
    started: list[Server] = []
    try:
        stack._servers(tmp_path / "data", started, cluster=False)
        yield started[-1]
    finally:
        for server in reversed(started):
            server.stop()


def _open_to_anyone(port: int) -> bool:
    """Whether a port listens beyond loopback (on every interface)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.settimeout(1)
        return probe.connect_ex((_own_address(), port)) == 0
    finally:
        probe.close()


def _own_address() -> str:
    """An address of this machine that is not loopback (the first of its interfaces)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # no packet is sent: it picks the interface
            address: str = s.getsockname()[0]
        except OSError:
            address = "127.0.0.1"
    return address


def _read_anonymously(http: int, grpc: int) -> None:
    client = weaviate.connect_to_local(host="127.0.0.1", port=http, grpc_port=grpc)
    try:
        client.collections.list_all()
    finally:
        client.close()


def test_the_demo_s_weaviate_takes_no_anonymous_client_on_any_port(demo_servers: Server) -> None:
    ports = demo_servers.ports
    with pytest.raises(Exception):  # noqa: B017, PT011 - unauthenticated, whichever kind
        _read_anonymously(ports["http"], ports["grpc"])
    data = httpx.get(f"http://127.0.0.1:{ports['data']}/nodes/status", timeout=5)
    assert data.status_code == 401, data.status_code
    for name, port in ports.items():
        if name not in ("grpc", "data") and _own_address() != "127.0.0.1":
            assert not _open_to_anyone(port), f"{name} listens beyond loopback"


def test_a_caller_s_sampled_trace_context_forces_no_recording(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A service that records none of its traces (ratio 0) records none of a caller's either,
    and at a ratio of one half a caller's chosen trace ids are recorded about half the time."""
    monkeypatch.setattr(trace, "set_tracer_provider", lambda provider: None)
    for ratio, most in ((0.0, 0), (0.5, 150)):
        settings = TracingSettings(endpoint="http://127.0.0.1:9", sample_ratio=ratio)
        provider = start_tracing("searcher", settings)
        assert provider is not None
        tracer = provider.get_tracer("test")
        recorded = 0
        for _ in range(200):
            caller = propagate.extract({"traceparent": SAMPLED})
            span = tracer.start_span("answer", context=caller)
            recorded += span.is_recording()
            span.end()
        provider.shutdown()
        assert recorded <= most, f"ratio {ratio}: {recorded} of 200 recorded"
