"""Each image's environment, built as its Dockerfile builds it, runs its service.

No Docker engine runs here, so the build stage's two ``uv sync`` steps run in a scratch folder
with the same inputs: only the workspace's metadata first, then the service's own sources. The
result must import the service and must not hold what other services need.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "services" / "Dockerfile").read_text()
SERVICES = sorted(p.parent.name for p in (ROOT / "services").glob("*/pyproject.toml"))


def _members() -> set[str]:
    """The workspace's members, as pyproject.toml's globs name them."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]["workspace"]
    return {
        str(p.parent.relative_to(ROOT))
        for g in globs["members"]
        for p in ROOT.glob(f"{g}/pyproject.toml")
    }


def _copied_metadata() -> list[str]:
    """The members whose pyproject.toml the Dockerfile copies before the first sync."""
    return re.findall(r"^COPY (\S+)/pyproject\.toml \1/$", DOCKERFILE, re.M)


def _copied_sources(dockerfile: str, service: str) -> list[str]:
    built = dockerfile.replace("${SERVICE}", service)
    return [m.group(1) for m in re.finditer(r"^COPY (\S+)/ \1/$", built, re.M)]


def _uv() -> list[str]:
    # `uv run` tells its children where uv is; otherwise the interpreter that installed it.
    if os.environ.get("UV"):
        return [os.environ["UV"]]
    found = shutil.which("uv")
    return [found] if found else ["python3", "-m", "uv"]


def _workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A scratch copy of the workspace's metadata, and an environment for its own venv."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "uv.lock"):
        shutil.copy(ROOT / name, src / name)
    for member in _copied_metadata():
        (src / member).mkdir(parents=True)
        shutil.copy(ROOT / member / "pyproject.toml", src / member / "pyproject.toml")
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(tmp_path / "venv"), "UV_LINK_MODE": "copy"}
    return src, env


def _copy(sources: list[str], src: Path) -> None:
    for source in sources:
        shutil.copytree(
            ROOT / source,
            src / source,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__"),
        )


def _probe(tmp_path: Path, imports: str, absent: tuple[str, ...]) -> tuple[int, str]:
    """Import ``imports`` in the scratch venv; list which of ``absent`` are installed."""
    code = (
        f"import importlib.util as u, sys; import {imports}; "
        f"found = [m for m in {absent!r} if u.find_spec(m)]; print(found); sys.exit(bool(found))"
    )
    python = tmp_path / "venv" / "bin" / "python"
    result = subprocess.run([str(python), "-c", code], cwd=tmp_path, capture_output=True, text=True)
    return result.returncode, result.stdout + result.stderr


def test_the_dockerfile_copies_every_workspace_member_s_metadata() -> None:
    assert "generator" in SERVICES
    assert set(_copied_metadata()) == _members()


@pytest.mark.parametrize("service", SERVICES)
def test_image_environment_runs_the_service(service: str, tmp_path: Path) -> None:
    src, env = _workspace(tmp_path)
    uv = [*_uv(), "sync", "-q", "--frozen", "--no-dev"]
    package = ["--package", f"kbus-{service}"]
    subprocess.run([*uv, "--no-install-workspace", *package], cwd=src, env=env, check=True)
    _copy(_copied_sources(DOCKERFILE, service), src)
    subprocess.run([*uv, "--no-editable", *package], cwd=src, env=env, check=True)
    others = tuple(f"kbus_{name}" for name in SERVICES if name != service)
    absent = (*others, "kbus_cli", "kbus_dev", "torch")
    code, output = _probe(tmp_path, f"kbus_{service}.app, kbus_{service}.__main__", absent)
    assert code == 0, output


def test_the_client_installs_without_the_services_runtime(tmp_path: Path) -> None:
    """An agent's process installs kbus-client: the wire contract comes, the runtime does not."""
    src, env = _workspace(tmp_path)
    _copy(["client", "shared/contract"], src)
    uv = [*_uv(), "sync", "-q", "--frozen", "--no-dev", "--no-editable", "--package", "kbus-client"]
    subprocess.run(uv, cwd=src, env=env, check=True)
    runtime = (
        "faststream",
        "weaviate",
        "uvicorn",
        "numpy",
        "Stemmer",
        "kbus_runtime",
        "opentelemetry.sdk",
    )
    code, output = _probe(tmp_path, "kbus_client, kbus_contract", runtime)
    assert code == 0, output
    # The probe can see an installed package: the contract's own dependency is found.
    code, output = _probe(tmp_path, "kbus_client", ("nats",))
    assert code == 1, output
