"""Dockerfiles and docker-compose.yml agree with the code: images, ports, settings."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kbus_dev.settings_doc import env_names
from kbus_embedder.settings import EmbedderSettings
from kbus_generator.settings import GeneratorSettings
from kbus_ingestor.settings import IngestorSettings
from kbus_reranker.settings import RerankerSettings
from kbus_runtime.settings import ServiceSettings
from kbus_searcher.settings import SearcherSettings

ROOT = Path(__file__).resolve().parents[2]
SERVICES: dict[str, type[ServiceSettings]] = {
    "ingestor": IngestorSettings,
    "embedder": EmbedderSettings,
    "searcher": SearcherSettings,
    "reranker": RerankerSettings,
    "generator": GeneratorSettings,
}


def _port(name: str) -> int:
    return int(SERVICES[name].model_fields["http_port"].default)


def test_one_dockerfile_builds_every_service() -> None:
    text = (ROOT / "services" / "Dockerfile").read_text()
    assert not list((ROOT / "services").glob("*/Dockerfile"))
    assert re.search(r"ARG PYTHON_IMAGE=python:3\.11-slim[\w.-]*@sha256:[0-9a-f]{64}", text)
    assert text.count("FROM ${PYTHON_IMAGE}") == 2  # build stage and slim runtime stage
    assert text.count("--package kbus-${SERVICE}") == 2
    assert "--no-dev" in text
    assert re.search(r"^USER 10001$", text, re.M)
    assert "EXPOSE ${PORT}" in text
    assert "KBUS_HTTP_HOST=0.0.0.0" in text
    assert "KBUS_SERVICE_PORT=${PORT}" in text
    assert "'http://127.0.0.1:%s/health' % os.environ['KBUS_SERVICE_PORT']" in text
    assert 'exec python -m \\"kbus_${KBUS_SERVICE}\\"' in text


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_the_image_host_reaches_each_service(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One variable for every service's address and log level (the image's KBUS_HTTP_HOST)."""
    monkeypatch.setenv("KBUS_HTTP_HOST", "0.0.0.0")
    monkeypatch.setenv("KBUS_LOG_LEVEL", "DEBUG")
    assert SERVICES[name]().process.http_host == "0.0.0.0"
    assert SERVICES[name]().process.log_level == "DEBUG"


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def test_compose_services_match_the_settings() -> None:
    compose = _compose()
    known = env_names()
    services = compose["services"]
    assert {"nats", "weaviate", "setup", *SERVICES} <= set(services)
    for name, service in services.items():
        assert ":" in service["image"], f"{name}: image must be pinned"
        if name in ("nats", "weaviate"):
            assert "healthcheck" in service
            continue
        env = service["environment"]
        unknown = [key for key in env if key.startswith("KBUS_") and key not in known]
        assert not unknown, f"{name}: settings that no class reads: {unknown}"
        assert env["KBUS_NATS_URL"] == "nats://nats:4222"
        if name in SERVICES:
            port = _port(name)
            assert env[f"KBUS_{name.upper()}_HTTP_PORT"] == str(port)
            assert f"127.0.0.1:{port}:{port}" in service["ports"]
            assert service["image"] == f"kbus-{name}:0.1.0"
            assert service["build"]["dockerfile"] == "services/Dockerfile"
            assert service["build"]["args"] == {"SERVICE": name, "PORT": str(port)}
            assert service["depends_on"]["setup"]["condition"] == "service_completed_successfully"
            assert service["read_only"] is True
            assert env["KBUS_DECLARE_STREAMS"] == "false"


def test_compose_weaviate_is_pinned_and_closed() -> None:
    weaviate = _compose()["services"]["weaviate"]
    assert weaviate["image"].endswith(":1.38.11")
    env = weaviate["environment"]
    assert env["AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED"] == "false"
    assert env["AUTHENTICATION_APIKEY_ENABLED"] == "true"
    assert env["DISABLE_TELEMETRY"] == "true"
    assert env["AUTOSCHEMA_ENABLED"] == "false"


def _compose_command() -> list[str] | None:
    """docker-compose, or a docker client's compose plugin where it has one."""
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") is None:
        return None
    plugin = subprocess.run(
        ["docker", "compose", "version"], capture_output=True, text=True, timeout=60
    )
    return ["docker", "compose"] if plugin.returncode == 0 else None


def test_docker_compose_config_accepts_the_file() -> None:
    command = _compose_command()
    if command is None:
        pytest.skip("no docker compose client installed")
    result = subprocess.run(
        [*command, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
