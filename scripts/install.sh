#!/usr/bin/env bash
# Installs everything kbus needs on a new machine: uv, the Python workspace (from uv.lock), and
# nats-server and weaviate-server with Go at pinned versions into ~/.cache/kbus/bin (`make test` adds
# the test tools and the LLM server).
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.8
if ! python3 -m uv --version >/dev/null 2>&1; then
  echo "installing uv ${UV_VERSION} ..."
  python3 -m pip install --quiet "uv==${UV_VERSION}"
fi
python3 -m uv sync --frozen
# nats-server and weaviate-server, built with Go at pinned versions.
python3 -m uv run --frozen python -m kbus_dev install

# docker-compose (Debian's) lets a test validate docker-compose.yml; without it that test skips.
if ! command -v docker-compose >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get install -y -qq docker-compose >/dev/null 2>&1 \
    || (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq docker-compose >/dev/null 2>&1)) \
    || echo "docker-compose could not be installed; its test will be skipped"
fi
