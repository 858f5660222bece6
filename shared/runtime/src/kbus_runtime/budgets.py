"""Each tenant's budget of every resource kbus's tenants share: the one place they are declared.

Nothing is reserved for a tenant: a budget is a ceiling on what one tenant may hold of a shared
stream, bucket or queue, checked before the tenant uses more, so one tenant's flood fills its
own budget and nothing of another's. A tenant past a budget is refused ``quota_exceeded``
naming the budget and the numbers (docs/security.md, "Budgets").

Where an operator sets no figure, a budget is a share (``KBUS_BUDGET_SHARE``, an eighth) of the
store it bounds, counted in that store's largest message, so a smaller installation gets
smaller budgets: ``documents_waiting`` is an eighth of the documents stream's bytes in messages
of at most :data:`MAX_STORED_MESSAGE_BYTES`, and so on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from kbus_contract import ORIGINAL_LIMIT
from kbus_contract.errors import ErrorCode, TransientError
from kbus_contract.intake import BODY_PART_BYTES
from kbus_contract.topology import Topology
from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

#: The largest message the gate stores in the documents stream (a larger text goes into the
#: store of large texts, and the message names it).
MAX_STORED_MESSAGE_BYTES = 256 * 1024
#: The largest message between the stages (the bus's own limit).
MAX_STAGE_MESSAGE_BYTES = 1024 * 1024
#: What a dead letter holds at most besides the original it keeps.
DEAD_LETTER_OVERHEAD = 8 * 1024
#: The largest receipt.
RECEIPT_BYTES = 2 * 1024
#: The smallest budget derived from a share (a tiny installation still takes some work).
FLOOR = 8


class TenantBudget(BaseModel):
    """One tenant's budget of each shared resource (unset: the default; see the module)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    searches_per_second: float | None = Field(
        default=None, ge=0.0, description="Searches a second, per searcher replica (0: none)."
    )
    chunks: int | None = Field(default=None, ge=0, description="Chunks stored (0: no limit).")
    documents_waiting: int | None = Field(
        default=None, ge=1, description="Documents accepted and not yet taken by the ingestor."
    )
    deletions_waiting: int | None = Field(default=None, ge=1, description="Deletions waiting.")
    syncs_waiting: int | None = Field(default=None, ge=1, description="Syncs waiting.")
    body_bytes: int | None = Field(
        default=None, ge=1, description="Bytes in the store of large texts."
    )
    chunk_messages: int | None = Field(
        default=None, ge=1, description="Messages of chunks waiting for the embedder."
    )
    embedding_messages: int | None = Field(
        default=None, ge=1, description="Messages of vectors waiting for the indexer."
    )
    dead_letters: int | None = Field(
        default=None, ge=1, description="Dead letters kept (past it, the tenant's oldest go)."
    )
    receipts: int | None = Field(
        default=None, ge=1, description="Receipts kept (past it, the tenant's oldest go)."
    )
    sync_list_bytes: int | None = Field(
        default=None, ge=1, description="Bytes of the sources' lists kept for syncs."
    )
    profiles: int | None = Field(default=None, ge=1, description="Library profiles set.")
    requests_in_flight: int | None = Field(
        default=None,
        ge=1,
        description="Requests answered at once per service replica (default: half of its "
        "concurrency); as many more wait, and past that they are refused.",
    )


@dataclass(frozen=True)
class Budget:
    """A tenant's budgets as figures (:meth:`Budgets.of`); 0: no limit."""

    searches_per_second: float
    chunks: int
    documents_waiting: int
    deletions_waiting: int
    syncs_waiting: int
    body_bytes: int
    chunk_messages: int
    embedding_messages: int
    dead_letters: int
    receipts: int
    sync_list_bytes: int
    profiles: int
    requests_in_flight: int | None


class BudgetSettings(BaseSettings):
    """Budgets of the tenants (every service reads the same)."""

    model_config = SettingsConfigDict(env_prefix="KBUS_", extra="ignore")

    tenant_budgets: dict[str, TenantBudget] = Field(
        default_factory=dict,
        description='Budgets of named tenants, as JSON: {"acme": {"searches_per_second": 5, '
        '"documents_waiting": 2000}}; what a tenant does not name is the default budget\'s.',
    )
    default_budget: TenantBudget = Field(
        default_factory=TenantBudget,
        description="The budget of every tenant tenant_budgets does not name (as JSON); unset "
        'figures are derived from budget_share (docs/security.md, "Budgets").',
    )
    budget_share: float = Field(
        default=0.125,
        gt=0.0,
        le=1.0,
        description="The share of each shared store one tenant may fill where no figure is set.",
    )


class Budgets:
    """Every tenant's budget in one installation."""

    def __init__(self, settings: BudgetSettings, topology: Topology) -> None:
        self.settings = settings
        self.topology = topology

    def _derived(self) -> dict[str, float | int | None]:
        share = self.settings.budget_share * self.topology.stream_max_bytes

        def count(unit: int) -> int:
            return max(FLOOR, int(share // unit))

        profiles_bytes = self.topology.profiles_kv.max_bytes or self.topology.stream_max_bytes
        return {
            "searches_per_second": 100.0,
            "chunks": 5_000_000,
            "documents_waiting": count(MAX_STORED_MESSAGE_BYTES),
            "deletions_waiting": count(MAX_STORED_MESSAGE_BYTES),
            "syncs_waiting": count(MAX_STORED_MESSAGE_BYTES),
            "body_bytes": max(FLOOR * BODY_PART_BYTES, int(share)),
            "chunk_messages": count(MAX_STAGE_MESSAGE_BYTES),
            "embedding_messages": count(MAX_STAGE_MESSAGE_BYTES),
            "dead_letters": count(ORIGINAL_LIMIT + DEAD_LETTER_OVERHEAD),
            "receipts": count(RECEIPT_BYTES),
            "sync_list_bytes": max(FLOOR * 1024, int(share)),
            "profiles": max(FLOOR, int(self.settings.budget_share * profiles_bytes // 4096)),
            "requests_in_flight": None,
        }

    def of(self, tenant: str) -> Budget:
        """``tenant``'s budgets: its own figures, else the default's, else derived."""
        own = self.settings.tenant_budgets.get(tenant)
        default = self.settings.default_budget
        derived = self._derived()
        values = {}
        for spec in fields(Budget):
            value = getattr(own, spec.name) if own is not None else None
            if value is None:
                value = getattr(default, spec.name)
            values[spec.name] = derived[spec.name] if value is None else value
        return Budget(**values)  # type: ignore[arg-type]


def waiting_budget(budgets: Budgets, topology: Topology) -> Callable[[str, str], int]:
    """A tenant's budget of messages waiting in a stream between the stages."""
    names = {
        topology.chunks_stream.name: "chunk_messages",
        topology.embeddings_stream.name: "embedding_messages",
    }

    def budget(tenant: str, stream: str) -> int:
        return int(getattr(budgets.of(tenant), names[stream]))

    return budget


def over_budget(tenant: str, name: str, after: int, budget: int, unit: str, then: str) -> None:
    """Refuse a use that would leave ``tenant`` holding ``after`` of a resource, past its
    ``budget`` (0: none): retryable, once some of what it holds is done with."""
    if not budget or after <= budget:
        return
    raise TransientError(
        f"tenant {tenant!r} would hold {after} {unit}, past its budget ({name}) of {budget}: "
        f"{then}",
        code=ErrorCode.QUOTA_EXCEEDED,
        retry_after_s=1.0,
    )
