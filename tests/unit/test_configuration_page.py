"""Every KBUS_* variable kbus reads, or a deployment sets, is on the configuration page."""

from __future__ import annotations

import re
from pathlib import Path

from kbus_dev.settings_doc import env_names

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"

#: Where Python reads an environment variable by name (settings classes are listed apart).
READ = re.compile(r"""(?:environ\.get\(|environ\[|getenv\(|envvar=)\s*["'](KBUS_[A-Z0-9_]+)["']""")
#: A variable a manifest, compose file or image sets.
SET = re.compile(r"\b(KBUS_[A-Z0-9_]+)\b")


def read_in_code() -> dict[str, str]:
    """Variables read outside settings classes, each with a file that reads it."""
    found: dict[str, str] = {}
    for top in ("services", "shared", "models", "client", "cli", "devtools"):
        for path in (ROOT / top).rglob("*.py"):
            for name in READ.findall(path.read_text()):
                found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def set_by_deployments() -> dict[str, str]:
    """Variables the Kubernetes manifests, the compose file and the image set."""
    paths = [*(ROOT / "deploy").rglob("*.yaml"), ROOT / "docker-compose.yml"]
    paths.append(ROOT / "services" / "Dockerfile")
    found: dict[str, str] = {}
    for path in paths:
        for name in SET.findall(path.read_text()):
            found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def test_every_variable_read_or_set_is_on_the_page() -> None:
    page = PAGE.read_text()
    listed = set(re.findall(r"`(KBUS_[A-Z0-9_]+)`", page))
    wanted = {**read_in_code(), **set_by_deployments(), **dict.fromkeys(env_names(), "settings")}
    missing = {name: where for name, where in wanted.items() if name not in listed}
    assert not missing, f"not on docs/configuration.md: {missing}"


def test_what_a_deployment_sets_comes_first() -> None:
    page = PAGE.read_text()
    assert page.index("### What a deployment sets") < page.index("### Tuning, by service")
    first = page.split("### Tuning, by service")[0]
    for name in (
        "KBUS_NATS_URL",
        "KBUS_NATS_CREDENTIALS",
        "KBUS_WEAVIATE_API_KEY",
        "KBUS_COHERE_API_KEY",
    ):
        assert f"`{name}`" in first
    assert "`KBUS_ACK_WAIT_S`" not in first  # a tuning knob
