"""The chaos test at CI size, and its negative control.

``python -m tests.chaos`` runs the full size (2,000 documents); this runs 200 with the same
kinds of damage: every service SIGKILLed three times, NATS restarted, Weaviate down 20 s.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from kbus_dev.services import STAGES

from tests.chaos.harness import SEARCH_GAP_TARGET_S, ChaosConfig, run_chaos
from tests.chaos.monkey import CARRIERS

# The one-node runs share a worker with the other tests (their own servers, nothing timed);
# the cluster runs time their searches' gaps, so they run alone.
pytestmark = [pytest.mark.chaos, pytest.mark.xdist_group("chaos")]

CI_SIZE = ChaosConfig(documents=200, publish_seconds=15.0, kills_per_service=3)


async def test_nothing_is_lost_duplicated_stale_or_misplaced_under_chaos(tmp_path: Path) -> None:
    report = await run_chaos(CI_SIZE, tmp_path)
    findings = report.findings
    assert findings.damage() == dict.fromkeys(findings.damage(), 0), findings.examples
    assert findings.chunks_checked > 300
    kills = [a for a in report.actions if "kill:" in a]
    # Every stage a document passes through (the searcher as indexer and query searcher), 3 each.
    assert len(kills) == 3 * len(CARRIERS)
    assert any("restart:nats" in a for a in report.actions)
    assert any("outage:weaviate" in a for a in report.actions)


async def test_the_checker_sees_the_loss_when_services_ack_before_processing(
    tmp_path: Path,
) -> None:
    """The same kills, but the documents come in one burst, so each stage holds work when it
    is killed: at 200 documents spread over 15 s the stages keep up, and a kill of an idle
    service acked nothing it had not finished (one CI run lost nothing). NATS restarts and
    Weaviate stops as in the run it controls: with the kills alone, one make test lost
    nothing."""
    control = replace(CI_SIZE, ack_first=True, publish_seconds=4.0, quiet_documents=0)
    report = await run_chaos(control, tmp_path)
    findings = report.findings
    lost = (
        findings.documents_lost
        + findings.documents_missing_chunks
        + findings.deleted_documents_present
    )
    print(f"ack first: {lost} documents lost, {findings}")
    assert lost > 0, findings


CLUSTER_CI_SIZE = ChaosConfig(
    documents=60,
    publish_seconds=30.0,
    kills_per_service=1,
    cluster=True,
    replicas=2,
    leader_kills=3,
    weaviate_kills=1,
    weaviate_down_s=10.0,
    searches_per_s=3.0,
    # The control loses 2 to 10 % of its searches (reliability.md, the cluster runs): at one a
    # second over a run of 100 s it lost none once in make test; at three, about 300 searches,
    # losing none is a chance under 0.3 %.
    control_searches_per_s=3.0,
    idle_search_s=5.0,
    rolling_restart=True,
    repair_timeout_s=30.0,
)


@pytest.mark.alone
async def test_a_cluster_loses_nothing_and_answers_every_search_through_kills_and_a_rollout(
    tmp_path: Path,
) -> None:
    """Two replicas of every stage; one of each SIGKILLed, three stream leaders, the Weaviate
    schema's Raft leader, then every replica replaced by a rolling restart, while searches
    run from three retrying clients and one that sends each search once."""
    report = await run_chaos(CLUSTER_CI_SIZE, tmp_path)
    findings = report.findings
    damage = findings.damage()
    assert damage == dict.fromkeys(damage, 0), findings.examples
    assert findings.chunks_checked > 80
    assert report.missing_at_all
    assert not any(report.missing_at_all.values())
    assert report.tenants_unreadable == 0, report.actions
    kinds = {a.split()[1].split(":")[0] for a in report.actions if ":" in a}
    assert {"kill", "leader", "node"} <= kinds
    assert any("(the Raft leader)" in a for a in report.actions), report.actions
    assert len(report.rolling_restart.replaced) == 2 * len(STAGES)
    searches = report.searches
    assert searches.not_retryable == 0, searches
    assert report.rolling_restart.failed == 0, (searches.failures, report.rolling_restart)
    # The full run (make chaos-cluster) is held to the targets (99.9 %, 3 s); at this size
    # one lost search is 1 %, so here: at most one, and no stretch over 5 s.
    assert searches.asked - searches.answered <= 1, (searches.failures, report.actions)
    assert searches.longest_gap_s <= 5.0, (searches.failures, report.actions)
    # The control through the same failures: without asking again, searches are lost.
    control = report.searches_without_retry
    assert control.asked > 20
    assert control.answered < control.asked, report.actions


@pytest.mark.alone
async def test_with_one_copy_of_everything_a_kill_is_a_gap_and_a_node_down_hides_tenants(
    tmp_path: Path,
) -> None:
    """The negative controls of the cluster run, in one run on the same cluster: one query
    searcher, SIGKILLed twice, is a stretch without answers longer than the target allows,
    retries or not; and with one copy of each Weaviate shard, the node killed (the fullest)
    held some tenant's only copy, which no live node could read."""
    control = replace(
        CLUSTER_CI_SIZE,
        replicas=1,
        replication=1,
        raft_leader_first=False,
        kill_stages="query",
        kills_per_service=2,
        leader_kills=0,
        weaviate_kills=1,
        publish_seconds=20.0,
        rolling_restart=False,
        repair_timeout_s=20.0,
        quiet_documents=0,
    )
    report = await run_chaos(control, tmp_path)
    assert report.search_control
    assert sum("kill:query" in a for a in report.actions) == 2, report.actions
    assert report.searches.longest_gap_s > SEARCH_GAP_TARGET_S, report.searches
    assert report.tenants_unreadable > 0, report.actions
