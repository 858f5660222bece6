"""Reading the deployment's monitoring: its alerting rules (checked with promtool) and its
dashboard's queries, and the series they name."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
from kbus_dev.observability import ensure_promtool


def check_rules(*files: Path) -> subprocess.CompletedProcess[str]:
    """``promtool check rules`` on alerting rule files (its output and exit code)."""
    return subprocess.run(
        [str(ensure_promtool()), "check", "rules", *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
    )


def rule_groups(prometheus_rule: Path) -> dict[str, Any]:
    """The rule groups of a PrometheusRule manifest, as a Prometheus rule file holds them."""
    manifest = yaml.safe_load(prometheus_rule.read_text())
    groups: dict[str, Any] = {"groups": manifest["spec"]["groups"]}
    return groups


def alert_expressions(prometheus_rule: Path) -> dict[str, str]:
    """Each alert's expression, by alert name."""
    return {
        rule["alert"]: rule["expr"]
        for group in rule_groups(prometheus_rule)["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }


def dashboard_expressions(dashboard: Path) -> list[str]:
    """Every query of a Grafana dashboard's panels."""
    panels = json.loads(dashboard.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel.get("targets", [])]


def metric_names(expressions: list[str]) -> set[str]:
    """The kbus and FastStream series an expression reads."""
    return {m for e in expressions for m in re.findall(r"\b(?:kbus|faststream)_[a-z_]+\b", e)}
