"""Gateway settings (env prefix ``KBUS_GATEWAY_``)."""

from __future__ import annotations

from kbus_runtime.settings import ServiceSettings
from pydantic import Field
from pydantic_settings import SettingsConfigDict


class GatewaySettings(ServiceSettings):
    """How many messages the gate takes at once, and how long it sends one to its stream."""

    model_config = SettingsConfigDict(env_prefix="KBUS_GATEWAY_", extra="ignore")

    http_port: int = Field(default=8106, description="Port of /health and /metrics.")
    concurrency: int = Field(
        default=64,
        ge=1,
        description="Messages one gateway checks and stores at once (more wait); a tenant's "
        "share is its budget's requests_in_flight.",
    )
    store_bound_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds the gate sends a message to a stream without a leader before it "
        "answers the publisher 503 (which sends it again).",
    )
