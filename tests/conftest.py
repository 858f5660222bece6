"""Fixtures: one real NATS and one real Weaviate per test session, started on loopback.

Set KBUS_TEST_NATS_URL, KBUS_TEST_WEAVIATE_HTTP_PORT and KBUS_TEST_WEAVIATE_GRPC_PORT to use
servers that are already running instead; KBUS_TEST_LLM_URL likewise for the LLM server (an
OpenAI-compatible base URL serving SmolLM2-135M-Instruct), which starts only for tests that ask.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kbus_dev.llm import llm_url, start_llm
from kbus_dev.servers import start_nats, start_weaviate


@dataclass(frozen=True)
class Servers:
    nats_url: str
    weaviate_http: int
    weaviate_grpc: int


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    if os.environ.get("KBUS_TEST_NATS_URL"):
        yield Servers(
            os.environ["KBUS_TEST_NATS_URL"],
            int(os.environ["KBUS_TEST_WEAVIATE_HTTP_PORT"]),
            int(os.environ["KBUS_TEST_WEAVIATE_GRPC_PORT"]),
        )
        return
    root: Path = tmp_path_factory.mktemp("servers")
    # A fixed store budget instead of a share of the free disk: JetStream reserves every stream's
    # and bucket's max bytes, and a session that reserves too much then fails on every machine.
    nats = start_nats(root / "nats", jetstream_config="  max_file_store: 16GB\n")
    try:
        weaviate = start_weaviate(root / "weaviate")
    except BaseException:
        nats.stop()
        raise
    try:
        yield Servers(
            f"nats://127.0.0.1:{nats.ports['client']}",
            weaviate.ports["http"],
            weaviate.ports["grpc"],
        )
    finally:
        weaviate.stop()
        nats.stop()


@pytest.fixture(scope="session")
def llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a real LLM server: SmolLM2-135M-Instruct on llama-cpp-python."""
    if os.environ.get("KBUS_TEST_LLM_URL"):
        yield os.environ["KBUS_TEST_LLM_URL"]
        return
    server = start_llm(tmp_path_factory.mktemp("llm"))
    try:
        yield llm_url(server)
    finally:
        server.stop()


@pytest.fixture(scope="session")
def embeddings_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a real OpenAI-compatible embeddings server: SmolLM2's mean-pooled token
    embeddings (576 dimensions) on llama-cpp-python."""
    server = start_llm(
        tmp_path_factory.mktemp("embeddings"), context=512, threads=1, embeddings=True
    )
    try:
        yield llm_url(server)
    finally:
        server.stop()


@dataclass(frozen=True)
class Namespace:
    """Names that belong to one test only: a bus prefix and a Weaviate collection."""

    prefix: str
    collection: str


@pytest.fixture
def namespace() -> Namespace:
    tag = uuid.uuid4().hex[:10]
    return Namespace(prefix=f"t{tag}", collection=f"T{tag}")


#: Session fixtures that start a folder's services, by the group whose tests share them.
SHARED_SERVICES = {"stack": "e2e", "locked": "security"}


# First: pytest-xdist's worker reads the groups in its own hook of the same name.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` (make test), one worker runs every test that uses one of the
    services a session starts (e2e's stack, security's locked installation), so each is
    started once, and one worker the tests of a module sharing a fixture of the module's (the
    demo's stack, say: two workers would start it twice); the others (integration's, the
    benches with their own stacks) spread over the workers."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        group = next((g for f, g in SHARED_SERVICES.items() if f in fixtures), None)
        group = group or _module_fixture_group(item)
        if group is not None and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(group))


def _module_fixture_group(item: pytest.Item) -> str | None:
    """The item's module, if the item uses a fixture set up once per module."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    scopes = {defs[-1].scope for defs in info.name2fixturedefs.values() if defs}
    return item.nodeid.split("::")[0] if "module" in scopes else None
