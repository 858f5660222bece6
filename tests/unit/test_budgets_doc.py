"""The budgets are declared once: the docs' table, the settings' names and every refusal come
from the one list of resources."""

from __future__ import annotations

from pathlib import Path

import pytest
from kbus_contract.errors import TransientError
from kbus_contract.topology import Topology
from kbus_dev import docblocks
from kbus_dev.tables_doc import TABLES
from kbus_runtime.budgets import (
    RESOURCES,
    Budgets,
    BudgetSettings,
    Resource,
    TenantBudget,
    over_budget,
    table,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_security_page_lists_every_budget_the_code_declares() -> None:
    for (page, block), generated in TABLES.items():
        assert docblocks.current(ROOT / page, block) == generated(), "run `make docs`"
    for resource in Resource:
        assert f"`{resource.value}`" in table()


def test_every_resource_has_a_figure_unless_it_says_none() -> None:
    budget = Budgets(BudgetSettings(), Topology()).of("acme")
    for resource in Resource:
        figure = budget[resource]
        assert figure is None or figure >= RESOURCES[resource].least, resource


def test_a_refusal_names_the_budget_and_says_its_unit() -> None:
    with pytest.raises(
        TransientError, match=r"513 documents waiting, past its budget \(documents_waiting\) of 512"
    ):
        over_budget("acme", Resource.DOCUMENTS_WAITING, 513, 512, "send it again")


def test_figures_are_held_to_their_kind() -> None:
    with pytest.raises(ValueError, match="whole number"):
        TenantBudget.of(documents_waiting=2.5)
    with pytest.raises(ValueError, match="at least"):
        TenantBudget.of(chunk_messages=0)
    assert TenantBudget.of(search_cost_per_second=2.5).get(Resource.SEARCH_COST_PER_SECOND) == 2.5
