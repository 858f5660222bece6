"""Settings every service shares. Each service adds its own class with its own env prefix.

Shared connection settings are read from ``KBUS_*`` (for example ``KBUS_NATS_URL``), so one
environment configures all four services; service settings from ``KBUS_<SERVICE>_*``.
"""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from kbus_shared.topology import Topology


class BusSettings(BaseSettings):
    """How to reach NATS, and which names on it belong to this installation."""

    model_config = SettingsConfigDict(env_prefix="KBUS_", extra="ignore")

    nats_url: str = "nats://127.0.0.1:4222"
    bus_prefix: str = Field(
        default="",
        pattern=r"^[A-Za-z0-9_-]*$",
        description="Prefix for every subject and stream name (empty: the plain names).",
    )
    nats_user: str | None = None
    nats_password: SecretStr | None = None
    stream_max_bytes: int = Field(
        default=1024**3, gt=0, description="Bytes each stream may hold (reserved on the server)."
    )

    @property
    def topology(self) -> Topology:
        return Topology(self.bus_prefix, self.stream_max_bytes)


class StoreSettings(BaseSettings):
    """How to reach Weaviate."""

    model_config = SettingsConfigDict(env_prefix="KBUS_WEAVIATE_", extra="ignore")

    http_host: str = "127.0.0.1"
    http_port: int = 8080
    grpc_host: str = "127.0.0.1"
    grpc_port: int = 50051
    secure: bool = False
    api_key: SecretStr | None = None
    collection: str = Field(default="KbusChunks", pattern=r"^[A-Z][A-Za-z0-9_]{0,127}$")
    timeout_s: float = 30.0


class CohereSettings(BaseSettings):
    """Cohere is used where a key is configured; everything works without it."""

    model_config = SettingsConfigDict(env_prefix="KBUS_COHERE_", extra="ignore")

    api_key: SecretStr | None = None
    embed_model: str = "embed-english-v3.0"
    rerank_model: str = "rerank-english-v3.0"
    base_url: str | None = None
    timeout_s: float = 30.0


class ServiceSettings(BaseSettings):
    """What every service process has: the bus and an HTTP port for /health and /metrics."""

    model_config = SettingsConfigDict(extra="ignore")

    bus: BusSettings = Field(default_factory=BusSettings)
    http_host: str = "127.0.0.1"
    http_port: int = 0
    log_level: str = "INFO"
