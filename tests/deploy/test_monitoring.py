"""The alerting rules pass promtool, and each alert fires on the situation it names and not on
a healthy stage beside it (promtool's rule unit tests, each alert's expression counted by its
labels). That the services export every series named here: tests/e2e/test_monitoring.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml
from kbus_dev.observability import ensure_promtool

from tests.monitoring import alert_expressions, check_rules, dashboard_expressions, rule_groups

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy/k8s/base/alerts.yaml"
DASHBOARD = ROOT / "deploy/k8s/base/dashboards/kbus.json"

#: Series over 30 minutes, one sample a minute: the embedder's backlog grows while it works;
#: the indexer has a backlog and no worker; the ingestor is healthy; one stream is nearly full;
#: the ingestor dead-letters once; searches are slow; the reranker's replicas fail their scrapes
#: and the query searchers are not scraped at all.
SERIES = {
    'kbus_stage_pending{stage="embedder",instance="a"}': "200+10x30",
    'kbus_stage_pending{stage="embedder",instance="b"}': "190+10x30",
    'kbus_stage_in_flight{stage="embedder",instance="a"}': "8x30",
    'kbus_stage_waiting_pulls{stage="embedder",instance="a"}': "0x30",
    'kbus_stage_pending{stage="indexer",instance="a"}': "50x30",
    'kbus_stage_in_flight{stage="indexer",instance="a"}': "0x30",
    'kbus_stage_waiting_pulls{stage="indexer",instance="a"}': "0x30",
    'kbus_stage_pending{stage="ingestor",instance="a"}': "500x30",
    'kbus_stage_in_flight{stage="ingestor",instance="a"}': "4x30",
    'kbus_stage_waiting_pulls{stage="ingestor",instance="a"}': "1x30",
    'kbus_stream_bytes{stream="KBUS_CHUNKS",instance="a"}': "900x30",
    'kbus_stream_limit_bytes{stream="KBUS_CHUNKS",instance="a"}': "1000x30",
    'kbus_stream_bytes{stream="KBUS_DOCUMENTS",instance="a"}': "100x30",
    'kbus_stream_limit_bytes{stream="KBUS_DOCUMENTS",instance="a"}': "1000x30",
    'kbus_stream_bytes{stream="KBUS_DEADLETTER",instance="a"}': "5x30",
    'kbus_stream_limit_bytes{stream="KBUS_DEADLETTER",instance="a"}': "-1x30",
    'kbus_messages_dead_lettered_total{stage="ingestor",code="too_large",instance="a"}': (
        "0x20 1x10"
    ),
    'kbus_messages_dead_lettered_total{stage="embedder",code="bad_vector",instance="a"}': "0x30",
    'kbus_search_stage_seconds_bucket{stage="total",le="1",instance="a"}': "0+10x30",
    'kbus_search_stage_seconds_bucket{stage="total",le="2.5",instance="a"}': "0+10x30",
    'kbus_search_stage_seconds_bucket{stage="total",le="5",instance="a"}': "0+100x30",
    'kbus_search_stage_seconds_bucket{stage="total",le="+Inf",instance="a"}': "0+100x30",
    'kbus_requests_total{stage="searcher",outcome="reranker_unavailable",instance="a"}': ("0+2x30"),
    'kbus_requests_total{stage="searcher",outcome="ok",instance="a"}': "0+50x30",
    **{
        f'up{{service="kbus-{name}",instance="a"}}': "1x30"
        for name in ("ingestor", "embedder", "searcher-indexer")
    },
    'up{service="kbus-reranker",instance="a"}': "0x30",
}

#: Per alert: the labels it is counted by, and the label sets that must fire at minute 25.
FIRING: dict[str, tuple[str, list[dict[str, str]]]] = {
    "KbusBacklogGrowing": ("stage", [{"stage": "embedder"}]),
    "KbusStageWithoutConsumer": ("stage", [{"stage": "indexer"}]),
    "KbusServiceDown": (
        "service",
        [{"service": "kbus-reranker"}, {"service": "kbus-searcher-query"}],
    ),
    "KbusDeadLetters": ("stage, code", [{"stage": "ingestor", "code": "too_large"}]),
    "KbusStreamNearLimit": ("stream", [{"stream": "KBUS_CHUNKS"}]),
    "KbusSearchSlow": ("", [{}]),
    "KbusRequestStageUnavailable": (
        "stage, outcome",
        [{"stage": "searcher", "outcome": "reranker_unavailable"}],
    ),
}


def _labels(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _unit_tests(rules_file: Path) -> dict[str, Any]:
    expressions = alert_expressions(RULES)
    assert set(expressions) == set(FIRING), "every alert has its case here"
    cases = []
    for alert, (by, firing) in FIRING.items():
        cases.append(
            {
                "expr": f"count by ({by}) ({expressions[alert]})",
                "eval_time": "25m",
                "exp_samples": [{"labels": _labels(labels), "value": 1} for labels in firing],
            }
        )
    return {
        "rule_files": [str(rules_file)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in SERIES.items()],
                "promql_expr_test": cases,
            }
        ],
    }


def test_the_alerting_rules_pass_promtool(tmp_path: Path) -> None:
    rules = tmp_path / "kbus-rules.yaml"
    rules.write_text(yaml.safe_dump(rule_groups(RULES)))
    checked = check_rules(rules)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(FIRING)} rules found" in checked.stdout


def test_each_alert_fires_on_its_situation_only(tmp_path: Path) -> None:
    rules = tmp_path / "kbus-rules.yaml"
    rules.write_text(yaml.safe_dump(rule_groups(RULES)))
    tests = tmp_path / "kbus-rules-test.yaml"
    tests.write_text(yaml.safe_dump(_unit_tests(rules)))
    result = subprocess.run(
        [str(ensure_promtool()), "test", "rules", str(tests)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_broken_rule_is_refused(tmp_path: Path) -> None:
    """The check can fail: a rule with a typo in its PromQL does not pass."""
    groups = rule_groups(RULES)
    groups["groups"][0]["rules"][0]["expr"] = "max by (stage) (kbus_stage_pending > "
    rules = tmp_path / "broken.yaml"
    rules.write_text(yaml.safe_dump(groups))
    assert check_rules(rules).returncode != 0


def test_every_dashboard_panel_queries_prometheus() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len(panels) >= 12
    assert all(p["targets"] and p["datasource"]["uid"] == "${datasource}" for p in panels)
    titles = " ".join(p["title"] for p in panels).lower()
    for topic in ("backlog", "throughput", "processing time", "dead letters", "search latency"):
        assert topic in titles
    assert len(dashboard_expressions(DASHBOARD)) >= len(panels)


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    """Each panel's query, Grafana's interval variable filled in, parses as a recording rule."""
    expressions = dashboard_expressions(DASHBOARD)
    rules = [
        {"record": f"kbus:panel_{i}", "expr": e.replace("$__rate_interval", "5m")}
        for i, e in enumerate(expressions)
    ]
    path = tmp_path / "panels.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    checked = check_rules(path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules)} rules found" in checked.stdout
