"""Jaeger (traces) and promtool (alerting rules), built from the Go module proxy at pinned versions.

Jaeger runs all-in-one, in memory, with its OTLP/HTTP receiver and its UI on loopback ports of
our choosing (its defaults listen on fixed ports, the UI on every interface).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from kbus_dev.servers import Server, _spawn, _wait, ensure_binary, free_port

# cmd/jaeger's go.mod has replace directives: go install refuses it, a tool module builds it.
JAEGER = ("jaeger", "github.com/jaegertracing/jaeger/cmd/jaeger", "v1.76.0")
PROMTOOL = ("promtool", "github.com/prometheus/prometheus/cmd/promtool", "v0.316.0")

_JAEGER_CONFIG = """\
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{ui}
    grpc:
      endpoint: 127.0.0.1:{query_grpc}
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp}
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"""


def ensure_jaeger() -> Path:
    return ensure_binary(*JAEGER, tool_module=True)


def ensure_promtool() -> Path:
    return ensure_binary(*PROMTOOL, tool_module=True)


def start_jaeger(data_dir: Path, timeout_s: float = 60.0) -> Server:
    """Jaeger all-in-one on 127.0.0.1: ports ``otlp`` (OTLP/HTTP) and ``ui`` (UI and API)."""
    binary = ensure_jaeger()
    ports = {"otlp": free_port(), "ui": free_port(), "query_grpc": free_port()}
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "jaeger.yaml"
    config.write_text(_JAEGER_CONFIG.format(**ports))
    log = data_dir / "jaeger.log"
    proc = _spawn([str(binary), "--config", str(config)], log)
    server = Server("jaeger", proc, log, ports)
    _wait(
        lambda: _answers(f"http://127.0.0.1:{ports['ui']}/api/services"),
        "jaeger",
        timeout_s,
        proc,
        log,
    )
    return server


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def traces(ui_port: int, service: str, limit: int = 20) -> list[dict[str, Any]]:
    """Jaeger's traces that hold a span of ``service`` (its query API, as the UI reads it)."""
    response = httpx.get(
        f"http://127.0.0.1:{ui_port}/api/traces",
        params={"service": service, "limit": limit, "lookback": "1h"},
        timeout=10.0,
    )
    response.raise_for_status()
    data: list[dict[str, Any]] = response.json()["data"] or []
    return data
