"""An agent's process that traces: one step publishes a document and calls kbus as a tool.

``python -m tests.e2e.agent NATS_URL PREFIX OTLP_ENDPOINT`` prints the step's trace id. It
installs its own tracer provider, as an application does; kbus's client only uses the
OpenTelemetry API, so its spans join the agent's trace.
"""

from __future__ import annotations

import asyncio
import sys

from kbus_client import KbClient
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

TEXT = (
    "# Travel\n\n## Expenses\n\nTrain tickets are booked through the travel desk; keep the "
    "receipt and file it within thirty days. Taxis are refunded after 10 pm only.\n"
)


async def step(nats_url: str, prefix: str) -> str:
    tracer = trace.get_tracer("agent")
    with tracer.start_as_current_span("agent step") as span:
        async with await KbClient.connect(nats_url, prefix=prefix, tenant="tracing") as kb:
            await kb.publish_document(
                library="handbook",
                document_id="travel.md",
                title="Travel",
                text=TEXT,
                content_type="text/markdown",
                wait=True,
            )
            tool = kb.as_tool(name="search_handbook", libraries=["handbook"])
            answer = await tool.call_json({"query": "how are train tickets booked?"})
            assert "travel desk" in answer, answer
        return format(span.get_span_context().trace_id, "032x")


def main() -> None:
    nats_url, prefix, endpoint = sys.argv[1:4]
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{endpoint}/v1/traces")))
    trace.set_tracer_provider(provider)
    print(asyncio.run(step(nats_url, prefix)))
    provider.shutdown()


if __name__ == "__main__":
    main()
