"""OpenTelemetry traces of a service: off unless an OTLP endpoint is configured.

With tracing on, a service installs a tracer provider that exports to the endpoint over
OTLP/HTTP. Stream messages carry the W3C trace context in their headers (FastStream's NATS
telemetry middleware publishes and consumes them); requests carry it when the caller is tracing
(:func:`kbus_contract.wire.request`), and :func:`answering_span` continues it where a request is
answered. With tracing off nothing is installed: the OpenTelemetry API's spans do nothing and no
request grows a header.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator, Mapping, Sequence
from importlib.metadata import version
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import (
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

tracer = trace.get_tracer("kbus")


class TracingSettings(BaseSettings):
    """Where traces go (``KBUS_TRACING_*``); one environment configures every service."""

    model_config = SettingsConfigDict(env_prefix="KBUS_TRACING_", extra="ignore")

    endpoint: str | None = Field(
        default=None,
        description="OTLP/HTTP endpoint that receives traces, e.g. http://127.0.0.1:4318 "
        "(unset: tracing off).",
    )
    sample_ratio: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description="Share of traces that are recorded, whether a service starts them or a "
        "caller does (a caller's choice to sample never forces a service to record).",
    )
    schedule_delay_ms: int = Field(
        default=1_000, ge=1, description="Milliseconds between exports of finished spans."
    )


def start_tracing(service: str, settings: TracingSettings) -> TracerProvider | None:
    """Install the process's tracer provider (None when tracing is off)."""
    if not settings.endpoint:
        return None
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": f"kbus-{service}", "service.version": version(f"kbus-{service}")}
        ),
        sampler=sampler(settings.sample_ratio),
    )
    exporter = OTLPSpanExporter(endpoint=f"{settings.endpoint.rstrip('/')}/v1/traces")
    provider.add_span_processor(
        BatchSpanProcessor(exporter, schedule_delay_millis=settings.schedule_delay_ms)
    )
    trace.set_tracer_provider(provider)
    return provider


class _Drawn(Sampler):
    """Records a share of what a caller sends, drawn here: neither the caller's sampled flag
    nor a trace id it chose decides (a caller could pick ids a ratio of the id always takes)."""

    def __init__(self, ratio: float) -> None:
        self.ratio = ratio

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        chosen = random.random() < self.ratio
        return SamplingResult(Decision.RECORD_AND_SAMPLE if chosen else Decision.DROP)

    def get_description(self) -> str:
        return f"Drawn{{{self.ratio}}}"


def sampler(ratio: float) -> Sampler:
    """What a service records: ``ratio`` of the traces it starts, and of those a caller starts
    (drawn here, whatever the caller asked); within the service, a span follows its parent."""
    drawn = _Drawn(ratio)
    return ParentBased(
        TraceIdRatioBased(ratio), remote_parent_sampled=drawn, remote_parent_not_sampled=drawn
    )


@contextlib.contextmanager
def answering_span(name: str, subject: str, headers: Mapping[str, str] | None) -> Iterator[Span]:
    """The span of answering one request, a child of the caller's span where it sent one."""
    parent = propagate.extract(dict(headers)) if headers else None
    with tracer.start_as_current_span(
        name,
        context=parent,
        kind=SpanKind.SERVER,
        attributes={"messaging.system": "nats", "messaging.destination.name": subject},
    ) as span:
        yield span


@contextlib.contextmanager
def store_span(operation: str, collection: str, tenant: str) -> Iterator[Span]:
    """The span of one call to Weaviate."""
    with tracer.start_as_current_span(
        f"weaviate {operation}",
        kind=SpanKind.CLIENT,
        attributes={
            "db.system.name": "weaviate",
            "db.operation.name": operation,
            "db.collection.name": collection,
            "kbus.tenant": tenant,
        },
    ) as span:
        yield span


def batch_span(name: str, contexts: Sequence[Context], size: int) -> Span:
    """The span of work done once for several messages: a child of the first message's span,
    linked to the others' (each message's trace shows the batch it went in)."""
    links = [
        Link(context)
        for parent in contexts[1:]
        if (context := trace.get_current_span(parent).get_span_context()).is_valid
    ]
    return tracer.start_span(
        name,
        context=contexts[0] if contexts else None,
        links=links,
        attributes={"kbus.batch.messages": len(contexts), "kbus.batch.size": size},
    )


def annotate(key: str, value: str) -> None:
    """Set an attribute on the current span (nothing when tracing is off)."""
    trace.get_current_span().set_attribute(key, value)


def failed(span: Span, code: str, message: str) -> None:
    """Mark a span as ended in an error reply."""
    span.set_attribute("kbus.error.code", code)
    span.set_status(Status(StatusCode.ERROR, message[:200]))
