"""Settings every service shares. Each service adds its own class with its own env prefix.

Shared connection settings are read from ``KBUS_*`` (for example ``KBUS_NATS_URL``), so one
environment configures every service; service settings from ``KBUS_<SERVICE>_*``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any, Literal

from kbus_contract.topology import Topology
from pydantic import Field, JsonValue, PositiveFloat, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from kbus_runtime.budgets import BudgetSettings
from kbus_runtime.redelivery import OUTAGE_PATIENCE_S
from kbus_runtime.tracing import TracingSettings

#: Marks a setting a deployment sets (where the servers are, credentials, keys, copies): the
#: configuration page lists these first, the tuning knobs after.
DEPLOY: dict[str, JsonValue] = {"deploy": True}


class BusSettings(BaseSettings):
    """How to reach NATS, and which names on it belong to this installation."""

    model_config = SettingsConfigDict(env_prefix="KBUS_", extra="ignore")

    nats_url: str = Field(
        json_schema_extra=DEPLOY,
        default="nats://127.0.0.1:4222",
        description="NATS server URL, or several separated by commas (a cluster's servers).",
    )
    publish_retry_s: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a publish the stream did not acknowledge is sent again (same "
        "Nats-Msg-Id) before the message fails; a stream leader election takes a few seconds "
        '(docs/reliability.md, "A cluster").',
    )
    max_document_bytes: int = Field(
        default=64 * 1024**2,
        gt=0,
        description="The largest document kbus takes, in bytes (its UTF-8 text or its file): "
        "the gateway refuses a larger one at its first part, before the rest is sent; the "
        "ingestor a larger web page.",
    )
    bus_prefix: str = Field(
        default="",
        pattern=r"^[A-Za-z0-9_-]*$",
        description="Prefix for every subject and stream name (empty: the plain names).",
    )
    nats_credentials: SecretStr | None = Field(
        json_schema_extra=DEPLOY,
        default=None,
        description="The service's NATS credentials: the text of its .creds file (its user's "
        "JWT and seed, as python -m kbus_dev nats-auth writes it; secret). Unset: an open "
        "development server.",
    )
    nats_credentials_file: str | None = Field(
        json_schema_extra=DEPLOY,
        default=None,
        description="The .creds file instead (a mounted Secret), read again while the service "
        "runs: it moves to a renewed JWT before the old one ends (nats-auth --renew). Wins "
        "over nats_credentials.",
    )
    nats_tls_ca: str | None = Field(
        json_schema_extra=DEPLOY,
        default=None,
        description="CA file that signed the NATS server's certificate (TLS).",
    )
    nats_tls_cert: str | None = Field(
        json_schema_extra=DEPLOY,
        default=None,
        description="Client certificate file, where the server asks for one.",
    )
    nats_tls_key: str | None = Field(
        json_schema_extra=DEPLOY, default=None, description="The client certificate's key."
    )

    @property
    def nats_servers(self) -> list[str]:
        """The servers ``nats_url`` names."""
        return [url.strip() for url in self.nats_url.split(",") if url.strip()]

    stream_max_bytes: int = Field(
        default=1024**3, gt=0, description="Bytes each stream may hold (reserved on the server)."
    )

    stream_replicas: int = Field(
        json_schema_extra=DEPLOY,
        default=1,
        ge=1,
        le=5,
        description="Copies of each stream (3 in a production cluster).",
    )
    declare_streams: bool = Field(
        default=True,
        description="Create and update streams at start; false where a setup job owns them "
        "(services then only check that they exist).",
    )
    inbox_prefix: str = Field(
        default="_INBOX",
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="Prefix of this service's reply inboxes (per-user prefixes keep replies "
        "private under NATS permissions).",
    )

    ack_wait_s: float = Field(
        default=60.0,
        gt=1.0,
        description="Seconds before an unacknowledged message is delivered again (work in "
        "progress sends in-progress acks, so this bounds how long a crashed worker holds it).",
    )
    max_deliver: int = Field(
        default=10,
        ge=2,
        description="Deliveries of a message before it is dead-lettered (by its stage, or from "
        "the server's max-deliveries advisory when no delivery was ever settled).",
    )
    outage_patience_s: float = Field(
        default=OUTAGE_PATIENCE_S,
        ge=0.0,
        description="Seconds a message's last delivery waits in place for a dependency that is "
        "out (the store, the bus, a model) before it is dead-lettered: docs/reliability.md.",
    )
    backlog_interval_s: float = Field(
        default=10.0,
        ge=0.0,
        description="Seconds between reads of every stage's backlog and every stream's size "
        "from the server, for /metrics (0: none).",
    )
    fair_share: bool = Field(
        default=True,
        description="Each stage serves tenants with work waiting in turn, a tenant's "
        "interactive documents first; false: every stage takes its stream in order "
        '(docs/scaling.md, "Fair share").',
    )
    fair_share_poll_s: float = Field(
        default=0.2,
        gt=0.0,
        le=5.0,
        description="Seconds between a fair stage's reads of which tenants have work waiting "
        "(the longest a stage with nothing to do takes to notice new work).",
    )
    tenant_weights: dict[str, PositiveFloat] = Field(
        default_factory=dict,
        description='Fair-share weights by tenant, as JSON ({"gold": 4}): a tenant of weight '
        "4 is served four times as often as one of weight 1 while both have work waiting.",
    )

    def tls_context(self) -> ssl.SSLContext | None:
        """The TLS context of NATS connections (None: plain connections)."""
        if self.nats_tls_ca is None and self.nats_tls_cert is None:
            return None
        context = ssl.create_default_context(cafile=self.nats_tls_ca)
        if self.nats_tls_cert is not None:
            context.load_cert_chain(self.nats_tls_cert, self.nats_tls_key)
        return context

    @property
    def topology(self) -> Topology:
        return Topology(
            self.bus_prefix,
            self.stream_max_bytes,
            self.stream_replicas,
            self.declare_streams,
            self.inbox_prefix,
            self.ack_wait_s,
            self.max_deliver,
        )


@dataclass(frozen=True)
class WeaviateNode:
    """Where one Weaviate node answers."""

    host: str
    http_port: int
    grpc_port: int
    grpc_host: str


class StoreSettings(BaseSettings):
    """How to reach Weaviate."""

    model_config = SettingsConfigDict(env_prefix="KBUS_WEAVIATE_", extra="ignore")

    hosts: str = Field(
        json_schema_extra=DEPLOY,
        default="127.0.0.1:8080:50051",
        pattern=r"^[^,:\s]+:\d+:\d+(:[^,:\s]+)?(,[^,:\s]+:\d+:\d+(:[^,:\s]+)?)*$",
        description="Where Weaviate answers: host:rest_port:grpc_port[:grpc_host] per node, "
        "comma-separated (a cluster's: a client per node, the next taking over when the one in "
        "use stops).",
    )
    secure: bool = Field(default=False, description="Use TLS for REST and gRPC.")
    api_key: SecretStr | None = Field(
        json_schema_extra=DEPLOY, default=None, description="Weaviate API key (secret)."
    )
    collection: str = Field(
        default="KbusChunks",
        pattern=r"^[A-Z][A-Za-z0-9_]{0,127}$",
        description="The index: an alias of the collection of the active embedding model "
        "(each model's vectors live in <name>_<model>; python -m kbus_searcher.jobs.reembed "
        "switches).",
    )
    timeout_s: float = Field(default=30.0, description="Timeout of Weaviate calls, seconds.")
    failover_check_s: float = Field(
        default=1.0,
        gt=0,
        description="Seconds between liveness checks of the node in use when hosts names "
        "several: a lost node is left within about two checks.",
    )
    replication_factor: int = Field(
        json_schema_extra=DEPLOY,
        default=1,
        ge=1,
        description="Copies of each new collection's shards (3 on a three-node cluster; a "
        "collection keeps the factor it was created with).",
    )
    deletion_strategy: Literal[
        "DeleteOnConflict", "NoAutomatedResolution", "TimeBasedResolution"
    ] = Field(
        default="DeleteOnConflict",
        description="How replicas that disagree about a deleted object are repaired: a "
        "deletion wins, so a deleted document never comes back.",
    )
    write_consistency: Literal["ONE", "QUORUM", "ALL"] = Field(
        default="ALL",
        description="Copies that must confirm a write or deletion: ALL, so a receipt means "
        "searchable on every node; indexing waits while one is down. Why: "
        "docs/reliability.md#a-receipt-means-searchable-on-every-node.",
    )
    read_consistency: Literal["ONE", "QUORUM", "ALL"] = Field(
        default="QUORUM",
        description="Replicas a search or read asks, so that it sees what a quorum wrote.",
    )
    idle_tenant_s: float = Field(
        default=900.0,
        ge=0,
        description="Seconds an active tenant may go unused by this searcher before it is made "
        "inactive in Weaviate (files closed; its next read wakes it); 0: never. Why: "
        "docs/scaling.md#tenants.",
    )

    def nodes(self) -> list[WeaviateNode]:
        """The nodes to connect to, as ``hosts`` names them."""
        nodes = []
        for entry in self.hosts.split(","):
            host, rest, grpc, *grpc_host = entry.split(":")
            nodes.append(
                WeaviateNode(host, int(rest), int(grpc), grpc_host[0] if grpc_host else host)
            )
        return nodes


class CohereSettings(BaseSettings):
    """Cohere is used where a key is configured; everything works without it."""

    model_config = SettingsConfigDict(env_prefix="KBUS_COHERE_", extra="ignore")

    api_key: SecretStr | None = Field(
        json_schema_extra=DEPLOY,
        default=None,
        description="Cohere API key (secret); enables Cohere embed and rerank.",
    )
    embed_model: str = Field(default="embed-english-v3.0", description="Cohere embed model.")
    rerank_model: str = Field(default="rerank-english-v3.0", description="Cohere rerank model.")
    chat_model: str = Field(
        default="command-r7b-12-2024", description="Cohere chat model (query rewriting)."
    )
    base_url: str | None = Field(default=None, description="Cohere API base URL.")
    timeout_s: float = Field(default=30.0, description="Timeout of Cohere calls, seconds.")

    def client_options(self, purpose: str) -> dict[str, Any]:
        """Keyword arguments for ``cohere.ClientV2`` / ``AsyncClientV2``.

        Raises:
            ValueError: no key is configured (``purpose`` names what needed one).
        """
        if self.api_key is None:
            raise ValueError(f"{purpose} needs KBUS_COHERE_API_KEY")
        return {
            "api_key": self.api_key.get_secret_value(),
            "base_url": self.base_url,
            "timeout": self.timeout_s,
        }


class ProcessSettings(BaseSettings):
    """What every service process shares, set once for all of them."""

    model_config = SettingsConfigDict(env_prefix="KBUS_", extra="ignore")

    http_host: str = Field(
        json_schema_extra=DEPLOY,
        default="127.0.0.1",
        description="Address of every service's /health and /metrics (the images set 0.0.0.0).",
    )
    log_level: str = Field(
        default="INFO",
        description="DEBUG, INFO, WARNING or ERROR. DEBUG adds a line per message received and "
        "per message processed.",
    )


class ServiceSettings(BaseSettings):
    """What every service process has: the bus and an HTTP port for /health and /metrics."""

    model_config = SettingsConfigDict(extra="ignore")

    bus: BusSettings = Field(default_factory=BusSettings)
    budgets: BudgetSettings = Field(default_factory=BudgetSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)
    process: ProcessSettings = Field(default_factory=ProcessSettings)
    http_port: int = Field(default=0, description="Port of /health and /metrics.")
