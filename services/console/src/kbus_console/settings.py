"""Console settings (env prefix ``KBUS_CONSOLE_``)."""

from __future__ import annotations

from kbus_runtime.settings import BusSettings, ProcessSettings
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ConsoleSettings(BaseSettings):
    """Where the HTTP API listens, and how much of it one tenant may hold."""

    model_config = SettingsConfigDict(env_prefix="KBUS_CONSOLE_", extra="ignore")

    http_port: int = Field(default=8110, description="Port of the HTTP API and /health.")
    sessions: int = Field(
        default=256,
        ge=1,
        description="Credentials connected to NATS at once, every tenant's (the least recently "
        "used is closed first).",
    )
    tenant_sessions: int = Field(
        default=4,
        ge=1,
        description="Credentials of one tenant connected at once (its least recently used is "
        "closed first): one tenant's many tokens cannot take the others' connections.",
    )
    tenant_requests: int = Field(
        default=16,
        ge=1,
        description="Requests of one tenant answered at once; more are refused 429 at once.",
    )
    idle_s: float = Field(
        default=300.0, gt=0, description="A credential's connection unused this long is closed."
    )
    max_body_bytes: int = Field(
        default=8 * 1024**2,
        gt=0,
        description="The largest request body, in bytes (a larger one is refused 413 unread).",
    )
    timeout_s: float = Field(
        default=10.0, gt=0, description="Seconds a request waits for kbus's answer."
    )
    bus: BusSettings = Field(default_factory=BusSettings)
    process: ProcessSettings = Field(default_factory=ProcessSettings)
