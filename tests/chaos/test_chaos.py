"""The chaos test at CI size, and its negative control.

``python -m tests.chaos`` runs the full size (2,000 documents); this runs 200 with the same
kinds of damage: every service SIGKILLed three times, NATS restarted, Weaviate down 20 s.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.chaos.harness import ChaosConfig, run_chaos

pytestmark = pytest.mark.chaos

CI_SIZE = ChaosConfig(documents=200, publish_seconds=15.0, kills_per_service=3)


async def test_nothing_is_lost_duplicated_stale_or_misplaced_under_chaos(tmp_path: Path) -> None:
    report = await run_chaos(CI_SIZE, tmp_path)
    findings = report.findings
    assert findings.damage() == dict.fromkeys(findings.damage(), 0), findings.examples
    assert findings.chunks_checked > 300
    kills = [a for a in report.actions if "kill:" in a]
    assert len(kills) == 12
    assert any("restart:nats" in a for a in report.actions)
    assert any("outage:weaviate" in a for a in report.actions)


async def test_the_checker_sees_the_loss_when_services_ack_before_processing(
    tmp_path: Path,
) -> None:
    report = await run_chaos(replace(CI_SIZE, ack_first=True), tmp_path)
    findings = report.findings
    lost = (
        findings.documents_lost
        + findings.documents_missing_chunks
        + findings.deleted_documents_present
    )
    assert lost > 0, findings


CLUSTER_CI_SIZE = ChaosConfig(
    documents=60,
    publish_seconds=30.0,
    kills_per_service=1,
    cluster=True,
    leader_kills=1,
    weaviate_kills=1,
    weaviate_down_s=10.0,
    searches_per_s=2.0,
    repair_timeout_s=30.0,
)


async def test_a_cluster_loses_nothing_through_leader_node_and_service_kills(
    tmp_path: Path,
) -> None:
    report = await run_chaos(CLUSTER_CI_SIZE, tmp_path)
    findings = report.findings
    damage = findings.damage()
    assert damage == dict.fromkeys(damage, 0), findings.examples
    assert findings.chunks_checked > 80
    assert report.missing_at_all
    assert not any(report.missing_at_all.values())
    assert report.searches.answered > 0
    assert report.searches.not_retryable == 0, report.searches
    assert report.tenants_unreadable == 0, report.actions
    kinds = {a.split()[1].split(":")[0] for a in report.actions if ":" in a}
    assert {"kill", "leader", "node"} <= kinds


async def test_with_one_copy_a_node_down_leaves_its_tenants_unreadable(
    tmp_path: Path,
) -> None:
    control = replace(
        CLUSTER_CI_SIZE, replication=1, kills_per_service=0, leader_kills=0, repair_timeout_s=20.0
    )
    report = await run_chaos(control, tmp_path)
    # The node killed holds the most shards, so some tenant had its only copy there.
    assert report.tenants_unreadable > 0, report.actions
