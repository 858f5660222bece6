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
