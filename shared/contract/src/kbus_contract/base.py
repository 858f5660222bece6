"""The base of every message that crosses NATS: frozen, strict, versioned."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

SCHEMA_VERSION: Literal[1] = 1
#: The longest query kbus takes, in characters. The query's vector is made from its first
#: tokens (the embedding model's window, 256 tokens for all-MiniLM-L6-v2); keyword search reads
#: all of it.
MAX_QUERY_CHARS = 32_768
#: The longest budget a request may give, in milliseconds.
MAX_BUDGET_MS = 120_000

Metadata = dict[str, JsonValue]
MetadataScalar = str | int | float | bool


def budget_field(what: str) -> Any:
    """The ``budget_ms`` field of a request: how long its caller waits."""
    return Field(
        default=None,
        ge=1,
        le=MAX_BUDGET_MS,
        description="Milliseconds the caller waits for the answer, counted from when the "
        f"request is received{what}.",
    )


class Contract(BaseModel):
    """Base of every message: immutable, strict about unknown fields, versioned."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
