"""Each tenant's budget of every resource kbus's tenants share: the one place they are declared.

Nothing is reserved for a tenant: a budget is a ceiling on what one tenant may hold of a shared
stream, bucket, queue or replica, checked before the tenant uses more, so one tenant's flood
fills its own budget and nothing of another's. A tenant past a budget is refused
``quota_exceeded`` naming the budget and the numbers (docs/security.md, "Budgets").

:data:`RESOURCES` is the list: each :class:`Resource` with what it is, its unit, who holds a
tenant to it, what a tenant past it gets, and its default. The settings' JSON
(:class:`TenantBudget`), a tenant's figures (:class:`Budget`, read by :class:`Resource`, so a
misspelt name fails where it is written), the docs' table (``make docs``) and every refusal's
wording come from it.

Where an operator sets no figure, a budget is a share (``KBUS_BUDGET_SHARE``, an eighth) of the
store it bounds, counted in that store's largest message, so a smaller installation gets
smaller budgets: ``documents_waiting`` is an eighth of the documents stream's bytes in messages
of at most :data:`MAX_STORED_MESSAGE_BYTES`, and so on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from kbus_contract import ORIGINAL_LIMIT
from kbus_contract.errors import ErrorCode, TransientError
from kbus_contract.intake import BODY_PART_BYTES
from kbus_contract.topology import Topology
from pydantic import Field, RootModel, model_validator
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
#: Tenants whose budgets a process keeps worked out (the active ones).
BUDGETS_KEPT = 1024
#: Ordinary searches a second one searcher replica answers on two cores (docs/performance.md,
#: "Token states kept at ingest": 64 at concurrency 32): what a tenant's share of the searchers'
#: work is a share of.
REPLICA_SEARCHES_PER_S = 64.0


class Resource(StrEnum):
    """Every resource the tenants share, by the name of its budget."""

    DOCUMENTS_WAITING = "documents_waiting"
    DELETIONS_WAITING = "deletions_waiting"
    SYNCS_WAITING = "syncs_waiting"
    BODY_BYTES = "body_bytes"
    CHUNK_MESSAGES = "chunk_messages"
    EMBEDDING_MESSAGES = "embedding_messages"
    DEAD_LETTERS = "dead_letters"
    RECEIPTS = "receipts"
    SYNC_LIST_BYTES = "sync_list_bytes"
    PROFILES = "profiles"
    REQUESTS_IN_FLIGHT = "requests_in_flight"
    SEARCH_COST_PER_SECOND = "search_cost_per_second"
    SEARCH_COST_IN_FLIGHT = "search_cost_in_flight"
    CHUNKS = "chunks"


@dataclass(frozen=True)
class Share:
    """What a derived budget is a share of: one installation's stores."""

    #: Bytes of each stream one tenant may fill (its share of a stream's size).
    stream_bytes: float
    #: Bytes of the profiles bucket one tenant may fill.
    profile_bytes: float
    #: The share itself (``KBUS_BUDGET_SHARE``).
    fraction: float = 0.125

    def count(self, unit: int) -> int:
        """How many messages of at most ``unit`` bytes the share holds (at least :data:`FLOOR`)."""
        return max(FLOOR, int(self.stream_bytes // unit))


@dataclass(frozen=True)
class Spec:
    """One resource: what it is, its budget's unit, who holds a tenant to it and how."""

    #: The resource, as a person reads it (the docs' first column).
    what: str
    #: What the budget's figure counts, in a few words (every refusal says it).
    unit: str
    #: Who holds a tenant to it.
    held_by: str
    #: What a tenant past it gets.
    past: str
    #: The figure where no operator set one (None: no figure; see the unit).
    derived: Callable[[Share], float | None]
    #: Whether the figure is a whole number.
    whole: bool = True
    #: The least figure an operator may set.
    least: float = 1.0


RESOURCES: Mapping[Resource, Spec] = MappingProxyType(
    {
        Resource.DOCUMENTS_WAITING: Spec(
            "documents accepted and not yet taken by the ingestor (stream DOCUMENTS; messages "
            "of at most 256 KiB)",
            "documents waiting",
            "the gate, from the server's count of the tenant's subjects",
            "the publish is refused `quota_exceeded` (KbClient waits and sends again)",
            lambda s: s.count(MAX_STORED_MESSAGE_BYTES),
        ),
        Resource.DELETIONS_WAITING: Spec(
            "deletions waiting (DOCUMENTS)",
            "deletions waiting",
            "the gate",
            "refused `quota_exceeded`",
            lambda s: s.count(MAX_STORED_MESSAGE_BYTES),
        ),
        Resource.SYNCS_WAITING: Spec(
            "syncs waiting (DOCUMENTS)",
            "syncs waiting",
            "the gate",
            "refused `quota_exceeded`",
            lambda s: s.count(MAX_STORED_MESSAGE_BYTES),
        ),
        Resource.BODY_BYTES: Spec(
            "the store of large texts (BODIES; every stored part counts whole, 256 KiB)",
            "bytes of large texts",
            "the gate, before the first part of a text",
            "refused `quota_exceeded`; a text larger than the whole budget `too_large`",
            lambda s: max(FLOOR * BODY_PART_BYTES, int(s.stream_bytes)),
        ),
        Resource.CHUNK_MESSAGES: Spec(
            "chunks waiting for the embedder (CHUNKS)",
            "messages of chunks waiting for the embedder",
            "the ingestor (and the generator) take none of the tenant's next documents while "
            "it holds them, and send a large document's next part only once there is room",
            "its documents wait in DOCUMENTS; no one else's",
            lambda s: s.count(MAX_STAGE_MESSAGE_BYTES),
        ),
        Resource.EMBEDDING_MESSAGES: Spec(
            "vectors waiting for the indexer (EMBEDDINGS)",
            "messages of vectors waiting for the indexer",
            "the embedder, likewise",
            "they wait in CHUNKS",
            lambda s: s.count(MAX_STAGE_MESSAGE_BYTES),
        ),
        Resource.DEAD_LETTERS: Spec(
            "dead letters (DEADLETTER; each keeps at most 64 KiB of its original)",
            "dead letters kept",
            "the stage that dead-letters",
            "the tenant's oldest letters go",
            lambda s: s.count(ORIGINAL_LIMIT + DEAD_LETTER_OVERHEAD),
        ),
        Resource.RECEIPTS: Spec(
            "receipts (RECEIPTS)",
            "receipts kept",
            "the stage that sends them",
            "the tenant's oldest receipts go",
            lambda s: s.count(RECEIPT_BYTES),
        ),
        Resource.SYNC_LIST_BYTES: Spec(
            "the lists of its sources' syncs (bucket SYNCLISTS)",
            "bytes of the sources' lists kept for syncs",
            "the syncer, before it keeps a list",
            "the sync is refused: its receipt says `quota_exceeded`, its dead letter holds it",
            lambda s: max(FLOOR * 1024, int(s.stream_bytes)),
        ),
        Resource.PROFILES: Spec(
            "library profiles (bucket PROFILES)",
            "library profiles set",
            "the ingestor, before it keeps a new library's",
            "refused `quota_exceeded`",
            lambda s: max(FLOOR, int(s.profile_bytes // 4096)),
        ),
        Resource.REQUESTS_IN_FLIGHT: Spec(
            "requests being answered (every request service: the gate, searches, statistics, "
            "the feed, profiles, versions; per replica; unset: a quarter of its slots; four "
            "times its slots may wait)",
            "requests answered at once",
            "each replica, the tenants with requests waiting served in turn by their work",
            "refused `quota_exceeded` at once",
            lambda s: None,
        ),
        Resource.SEARCH_COST_PER_SECOND: Spec(
            "the searchers' work (per searcher replica; an ordinary search costs 1: "
            'docs/searching.md, "What a search costs"; unset: the share of the 64 a replica '
            "answers on two cores, 8; 0: no limit)",
            "work of searches a second",
            "the searcher, from each search's estimate, corrected by its measured work",
            "refused `quota_exceeded`, with when to retry",
            lambda s: s.fraction * REPLICA_SEARCHES_PER_S,
            whole=False,
            least=0.0,
        ),
        Resource.SEARCH_COST_IN_FLIGHT: Spec(
            "the searchers' work at once (per searcher replica; a costlier search runs alone)",
            "work of searches answered at once",
            "the searcher, before it starts a search",
            "the search waits its turn (refused past four times the replica's slots waiting)",
            lambda s: 8.0,
            whole=False,
        ),
        Resource.CHUNKS: Spec(
            "chunks stored (Weaviate; 0: no limit)",
            "chunks stored",
            "the indexer",
            "the document is dead-lettered `quota_exceeded`",
            lambda s: 5_000_000,
            least=0.0,
        ),
    }
)
if set(RESOURCES) != set(Resource):  # pragma: no cover - a resource without its spec
    raise ImportError(f"budgets without a spec: {sorted(set(Resource) - set(RESOURCES))}")


class TenantBudget(RootModel[dict[Resource, float]]):
    """One tenant's figures, by resource (one not named: the default; see the module)."""

    root: dict[Resource, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _within(self) -> TenantBudget:
        for resource, figure in self.root.items():
            spec = RESOURCES[resource]
            if figure < spec.least:
                raise ValueError(f"{resource.value} must be at least {spec.least:g}")
            if spec.whole and figure != int(figure):
                raise ValueError(f"{resource.value} is a whole number ({spec.unit})")
        return self

    def get(self, resource: Resource) -> float | None:
        return self.root.get(resource)

    @classmethod
    def of(cls, **figures: float) -> TenantBudget:
        """A budget from figures named as its resources (a name no resource has is refused)."""
        return cls.model_validate(figures)


class Budget:
    """A tenant's budgets as figures (:meth:`Budgets.of`); 0: no limit, None: none set."""

    def __init__(self, figures: Mapping[Resource, float | None]) -> None:
        self._figures = dict(figures)

    def __getitem__(self, resource: Resource) -> float | None:
        return self._figures[resource]

    def count(self, resource: Resource) -> int:
        """A whole-number budget (0: no limit or none set)."""
        return int(self._figures[resource] or 0)

    def figure(self, resource: Resource) -> float:
        """A budget's figure (0: no limit or none set)."""
        return float(self._figures[resource] or 0.0)


class BudgetSettings(BaseSettings):
    """Budgets of the tenants (every service reads the same)."""

    model_config = SettingsConfigDict(env_prefix="KBUS_", extra="ignore")

    tenant_budgets: dict[str, TenantBudget] = Field(
        default_factory=dict,
        description='Budgets of named tenants, as JSON: {"acme": {"search_cost_per_second": 5, '
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
        profiles = topology.profiles_kv.max_bytes or topology.stream_max_bytes
        share = settings.budget_share
        self._share = Share(share * topology.stream_max_bytes, share * profiles, share)

    def derived(self, resource: Resource) -> float | None:
        """A resource's figure where no operator set one."""
        return RESOURCES[resource].derived(self._share)

    @functools.lru_cache(maxsize=BUDGETS_KEPT)  # noqa: B019 - one per process, its settings fixed
    def of(self, tenant: str) -> Budget:
        """``tenant``'s budgets: its own figures, else the default's, else derived (worked out
        once per tenant, of the last :data:`BUDGETS_KEPT` asked about)."""
        own = self.settings.tenant_budgets.get(tenant) or TenantBudget()
        default = self.settings.default_budget
        figures: dict[Resource, float | None] = {}
        for resource in Resource:
            value = own.get(resource)
            if value is None:
                value = default.get(resource)
            figures[resource] = self.derived(resource) if value is None else value
        return Budget(figures)


def waiting_budget(budgets: Budgets, topology: Topology) -> Callable[[str, str], int]:
    """A tenant's budget of messages waiting in a stream between the stages."""
    names = {
        topology.chunks_stream.name: Resource.CHUNK_MESSAGES,
        topology.embeddings_stream.name: Resource.EMBEDDING_MESSAGES,
    }

    def budget(tenant: str, stream: str) -> int:
        return budgets.of(tenant).count(names[stream])

    return budget


def over_budget(tenant: str, resource: Resource, after: float, budget: float, then: str) -> None:
    """Refuse a use that would leave ``tenant`` holding ``after`` of a resource, past its
    ``budget`` (0: none): retryable, once some of what it holds is done with."""
    if not budget or after <= budget:
        return
    raise TransientError(
        f"tenant {tenant!r} would hold {after:g} {RESOURCES[resource].unit}, past its budget "
        f"({resource.value}) of {budget:g}: {then}",
        code=ErrorCode.QUOTA_EXCEEDED,
        retry_after_s=1.0,
    )


def table() -> str:
    """The docs' table of every resource (docs/security.md, "Budgets")."""
    rows = [
        "| resource | budget | held to it by | past it |",
        "| --- | --- | --- | --- |",
    ]
    for resource, spec in RESOURCES.items():
        rows.append(
            f"| {spec.what} | `{resource.value}`: {spec.unit} | {spec.held_by} | {spec.past} |"
        )
    return "\n".join(rows)
