"""A locked-down installation on loopback, provisioned as a deployment is.

nats-server in operator mode (``python -m kbus_dev nats-auth``'s ``auth.conf``), each tenant's
account pushed to it while it runs; Weaviate that takes only its API key; the setup job run as
the admin user; every service with its own least-privilege credentials and streams it may not
create. The security tests and ``bench.tenants`` run on it.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbus_client import CredentialFile

from kbus_dev.natsauth import SERVICES as USERS
from kbus_dev.natsauth import Credential, Keys, inbox, provision, push
from kbus_dev.servers import Server, start_nats, start_weaviate
from kbus_dev.services import SERVICES, start_service, wait_healthy

WEAVIATE_KEY = "test-weaviate-key-7f1c0b2e"


@dataclass
class Locked:
    """The servers, every user's credentials, and how each service is configured."""

    nats: Server
    weaviate: Server
    #: Each user's credentials (its JWT and seed), by name.
    creds: dict[str, str]
    #: Where nats-auth keeps the installation's keys and writes its files.
    auth: Path
    logs: Path
    #: The services' environment besides their credentials and the servers' addresses.
    settings: dict[str, str] = field(default_factory=dict)
    prefix: str = ""
    services: list[Server] = field(default_factory=list)
    weaviate_key: str = WEAVIATE_KEY
    #: Each service's /health and /metrics port (free ones where not named).
    service_ports: dict[str, int] = field(default_factory=dict)

    @property
    def nats_url(self) -> str:
        return f"nats://127.0.0.1:{self.nats.ports['client']}"

    @property
    def weaviate_http(self) -> int:
        return self.weaviate.ports["http"]

    @property
    def weaviate_grpc(self) -> int:
        return self.weaviate.ports["grpc"]

    @property
    def resolver_dir(self) -> str:
        return str(self.nats.log.parent / "jwt")

    def service_env(self, user: str) -> dict[str, str]:
        """A service's (or the admin jobs') environment, as ``user``."""
        return {
            **os.environ,
            "KBUS_NATS_URL": self.nats_url,
            "KBUS_NATS_CREDENTIALS": self.creds[user],
            "KBUS_INBOX_PREFIX": inbox(user),
            "KBUS_BUS_PREFIX": self.prefix,
            "KBUS_DECLARE_STREAMS": "false",
            "KBUS_WEAVIATE_HOSTS": f"127.0.0.1:{self.weaviate_http}:{self.weaviate_grpc}",
            "KBUS_WEAVIATE_API_KEY": self.weaviate_key,
            **self.settings,
        }

    async def provision(
        self,
        credentials: Sequence[Credential],
        touched: Collection[str] | None = None,
        rotate: Sequence[str] = (),
        **options: Any,
    ) -> Keys:
        """These credentials (the whole list, as nats-auth takes it; ``touched``: the tenants
        whose credentials changed, if known; ``rotate``: users given a new key, the old one
        revoked), pushed to the running server: new and changed accounts sent, removed ones
        deleted, no reload."""
        plan = provision(
            self.auth,
            credentials,
            prefix=self.prefix,
            resolver_dir=self.resolver_dir,
            touched=touched,
            rotate=rotate,
        )
        await push(self.nats_url, plan, max_reconnect_attempts=0, **options)
        for user in USERS:
            self.creds[user] = (self.auth / f"{user}.creds").read_text()
        for held in credentials:
            if touched is not None and held.tenant not in touched and held.name in self.creds:
                continue
            record = CredentialFile.read(self.auth / f"credential-{held.name}.json")
            self.creds[held.name] = record.creds.get_secret_value()
        return plan.keys

    def setup(self, *args: str) -> None:
        """The setup job, as the admin user (``--remove-tenant T``, say)."""
        done = subprocess.run(
            [sys.executable, "-m", "kbus_searcher.jobs.setup", *args],
            env=self.service_env("admin"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the setup job failed: {done.stderr[-2000:]}")

    def start_services(self) -> None:
        started = [
            start_service(name, self.service_env(name), self.logs, self.service_ports.get(name))
            for name in SERVICES
        ]
        self.services.extend(started)
        wait_healthy(started)

    def stop(self) -> None:
        for server in [*reversed(self.services), self.weaviate, self.nats]:
            server.stop()


@dataclass(frozen=True)
class Ports:
    """Where the locked installation listens (free ports where not named): ``make demo``
    names its own."""

    nats: int | None = None
    weaviate_http: int | None = None
    weaviate_grpc: int | None = None
    services: dict[str, int] = field(default_factory=dict)


def start_locked(
    root: Path,
    credentials: Sequence[Credential],
    settings: dict[str, str] | None = None,
    prefix: str = "",
    *,
    ports: Ports | None = None,
    weaviate_key: str = WEAVIATE_KEY,
    logs: Path | None = None,
) -> Locked:
    """The servers, the tenants' accounts pushed, the setup job run and the services up."""
    ports = ports or Ports()
    auth, nats_dir = root / "auth", root / "nats"
    provision(auth, credentials, prefix=prefix, resolver_dir=str(nats_dir / "jwt"))
    nats_dir.mkdir(parents=True, exist_ok=True)
    (nats_dir / "auth.conf").write_text((auth / "auth.conf").read_text())
    nats_server = start_nats(nats_dir, ports.nats, extra_config='include "auth.conf"\n')
    try:
        weaviate_server = start_weaviate(
            root / "weaviate", ports.weaviate_http, ports.weaviate_grpc, api_key=weaviate_key
        )
    except BaseException:
        nats_server.stop()
        raise
    creds = {name: (auth / f"{name}.creds").read_text() for name in USERS}
    locked = Locked(
        nats_server,
        weaviate_server,
        creds,
        auth,
        logs or root / "logs",
        settings or {},
        prefix,
        weaviate_key=weaviate_key,
        service_ports=ports.services,
    )
    try:
        asyncio.run(locked.provision(credentials))
        locked.setup()
        locked.start_services()
    except BaseException:
        locked.stop()
        raise
    return locked
