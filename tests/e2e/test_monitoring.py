"""Every series the dashboard and the alerting rules read is exported by the running services,
and the backlog they alert on is the server's own figure."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import httpx
from kbus_client import KbClient
from nats.aio.client import Client

from tests.e2e.conftest import Stack
from tests.helpers import document, find_in_stream, publish_raw
from tests.monitoring import alert_expressions, dashboard_expressions, metric_names

ROOT = Path(__file__).resolve().parents[2]
#: The series of a declared family (a counter's family is declared by its ``_total`` name).
SUFFIXES = {"histogram": ("_bucket", "_sum", "_count")}


def _exported(text: str) -> set[str]:
    """Series names a /metrics page holds, or declares (a labelled family with no child yet)."""
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1] != "#"}
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE):
        names |= {name + suffix for suffix in SUFFIXES.get(kind, ("",))}
    return names


async def _scrape(stack: Stack) -> dict[str, str]:
    async with httpx.AsyncClient() as http:
        return {
            name: (await http.get(f"http://127.0.0.1:{port}/metrics")).text
            for name, port in stack.http_ports.items()
        }


async def test_every_series_the_dashboard_and_alerts_read_is_exported(
    stack: Stack, nc: Client
) -> None:
    async with await KbClient.connect(
        stack.nats_url, prefix=stack.topology.prefix, tenant="metrics"
    ) as client:
        await client.publish_document(
            library="ops",
            document_id="runbook",
            title="Runbook",
            text="Restart the VPN.",
            wait=True,
        )
        await client.search("how do I restart the VPN?", libraries=["ops"])
    # A body naming another tenant than its subject: dead-lettered, and counted as refused.
    smuggled = document("other", "ops", "smuggled", text="Not for this tenant.")
    await publish_raw(nc, stack.topology, json.dumps(smuggled).encode(), "metrics", "ops")
    await find_in_stream(nc, stack.topology.dead_letters, {"code": "tenant_mismatch"})
    await asyncio.sleep(1.5)  # a read of the backlog (KBUS_BACKLOG_INTERVAL_S)

    pages = await _scrape(stack)
    exported = set().union(*(_exported(page) for page in pages.values()))
    named = metric_names(
        dashboard_expressions(ROOT / "deploy/k8s/base/dashboards/kbus.json")
        + list(alert_expressions(ROOT / "deploy/k8s/base/alerts.yaml").values())
    )
    assert len(named) >= 15
    assert named - exported == set()
    for service, page in pages.items():
        for stage in ("ingestor", "embedder", "indexer", "deleter"):
            assert f'kbus_stage_pending{{stage="{stage}"}}' in page, service
    refused = 'kbus_tenant_refusals_total{code="tenant_mismatch",stage="ingestor",tenant="metrics"}'
    assert refused in pages["ingestor"]
