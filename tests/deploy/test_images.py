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
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MEMBERS = [
    "shared",
    "models",
    "client",
    "cli",
    "devtools",
    "services/ingestor",
    "services/embedder",
    "services/searcher",
    "services/reranker",
]


def _copied_sources(dockerfile: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^COPY (\S+)/ \1/$", dockerfile, re.M)]


def _uv() -> list[str]:
    # `uv run` tells its children where uv is; otherwise the interpreter that installed it.
    if os.environ.get("UV"):
        return [os.environ["UV"]]
    found = shutil.which("uv")
    return [found] if found else ["python3", "-m", "uv"]


@pytest.mark.parametrize("service", ["ingestor", "embedder", "searcher", "reranker"])
def test_image_environment_runs_the_service(service: str, tmp_path: Path) -> None:
    dockerfile = (ROOT / "services" / service / "Dockerfile").read_text()
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "uv.lock"):
        shutil.copy(ROOT / name, src / name)
    for member in MEMBERS:
        (src / member).mkdir(parents=True)
        shutil.copy(ROOT / member / "pyproject.toml", src / member / "pyproject.toml")
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(tmp_path / "venv"), "UV_LINK_MODE": "copy"}
    uv = [*_uv(), "sync", "-q", "--frozen", "--no-dev"]
    package = ["--package", f"kbus-{service}"]
    subprocess.run([*uv, "--no-install-workspace", *package], cwd=src, env=env, check=True)
    for source in _copied_sources(dockerfile):
        shutil.copytree(
            ROOT / source,
            src / source,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    subprocess.run([*uv, "--no-editable", *package], cwd=src, env=env, check=True)
    python = tmp_path / "venv" / "bin" / "python"
    probe = (
        "import importlib.util as u, sys; "
        f"import kbus_{service}.app, kbus_{service}.__main__; "
        "others = [m for m in ('kbus_ingestor', 'kbus_embedder', 'kbus_searcher', "
        f"'kbus_reranker', 'kbus_cli', 'kbus_dev', 'torch') if m != 'kbus_{service}' "
        "and u.find_spec(m)]; print(others); sys.exit(1 if others else 0)"
    )
    result = subprocess.run(
        [str(python), "-c", probe], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
