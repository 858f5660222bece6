"""kbus over TLS: nats-server asks every connection for a certificate signed by its CA.

The services and the client connect with the CA and a client certificate; a connection
without a certificate is refused. Weaviate takes no TLS flags (docs/security.md says how to put
TLS in front of it).
"""

from __future__ import annotations

import os
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import nats
import pytest
from kbus_client import KbClient
from kbus_dev.certs import Certificates, make_certificates
from kbus_dev.servers import Server, start_nats
from kbus_dev.services import SERVICES, start_service, wait_healthy

from tests.conftest import Servers


@dataclass(frozen=True)
class Secured:
    url: str
    certs: Certificates


def _context(certs: Certificates, *, with_certificate: bool = True) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    if with_certificate:
        context.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return context


@pytest.fixture(scope="module")
def secured(servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("tls")
    certs = make_certificates(root / "certs")
    started: list[Server] = []
    try:
        nats_server = start_nats(
            root / "nats", extra_config=nats_tls_config(certs, verify_clients=True)
        )
        started.append(nats_server)
        url = f"tls://127.0.0.1:{nats_server.ports['client']}"
        tag = uuid.uuid4().hex[:8]
        env = {
            **os.environ,
            "KBUS_NATS_URL": url,
            "KBUS_NATS_TLS_CA": str(certs.ca),
            "KBUS_NATS_TLS_CERT": str(certs.client_cert),
            "KBUS_NATS_TLS_KEY": str(certs.client_key),
            "KBUS_WEAVIATE_HOSTS": f"127.0.0.1:{servers.weaviate_http}:{servers.weaviate_grpc}",
            "KBUS_WEAVIATE_COLLECTION": f"Tls{tag}",
            "KBUS_STREAM_MAX_BYTES": str(64 * 1024**2),
        }
        services = [start_service(name, env, root / "logs") for name in SERVICES]
        started.extend(services)
        wait_healthy(services)
        yield Secured(url, certs)
    finally:
        for server in reversed(started):
            server.stop()


async def test_the_pipeline_runs_over_tls_with_client_certificates(secured: Secured) -> None:
    kb = await KbClient.connect(secured.url, tenant="tls", tls=_context(secured.certs))
    async with kb:
        result = await kb.publish_document(
            library="wire",
            document_id="cipher",
            title="Transport",
            text="Every connection to the bus is encrypted with TLS and carries a certificate.",
            wait=True,
            timeout_s=120,
        )
        assert result.receipt is not None
        reply = await kb.search("is the bus encrypted?", libraries=["wire"])
        assert reply.results[0].document_id == "cipher"


async def test_a_connection_without_a_certificate_is_refused(secured: Secured) -> None:
    context = _context(secured.certs, with_certificate=False)
    with pytest.raises(Exception):  # noqa: B017, PT011 - the handshake or the connect fails
        await nats.connect(
            secured.url,
            tls=context,
            max_reconnect_attempts=0,
            connect_timeout=3,
            allow_reconnect=False,
        )


def nats_tls_config(certs: Certificates, *, verify_clients: bool) -> str:
    """nats-server's ``tls`` block for these certificates."""
    lines = [
        "tls {",
        f'  cert_file: "{certs.server_cert}"',
        f'  key_file: "{certs.server_key}"',
        f'  ca_file: "{certs.ca}"',
        f"  verify: {'true' if verify_clients else 'false'}",
        "  timeout: 5",
        "}",
    ]
    return "\n".join(lines) + "\n"
