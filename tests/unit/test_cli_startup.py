"""``kbus --help`` imports no command's module: the client, the bus and the models load only
for the command that runs."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest
import typer
from kbus_cli.main import COMMANDS, LazyCommand, summary_of
from typer.core import TyperCommand, TyperGroup

HELP_THEN_MODULES = """
import sys
from kbus_cli.main import app
try:
    app(["--help"])
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)))
"""


def test_the_help_of_kbus_imports_neither_the_client_nor_the_bus() -> None:
    ran = subprocess.run(
        [sys.executable, "-c", HELP_THEN_MODULES], capture_output=True, text=True, check=True
    )
    *listing, modules = ran.stdout.strip().splitlines()
    loaded = set(modules.split())
    assert all(f" {name} " in "".join(listing).replace("│", " ") for name in COMMANDS)
    heavy = {"kbus_client", "kbus_contract", "nats", "httpx", "pydantic", "kbus_cli.common"}
    assert not heavy & loaded, heavy & loaded


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_command_s_summary_is_what_its_source_says(name: str) -> None:
    module, attribute = COMMANDS[name].split(":")
    found = getattr(importlib.import_module(module), attribute)
    said = found.info.help if isinstance(found, typer.Typer) else inspect.getdoc(found)
    assert summary_of(COMMANDS[name]) == said
    assert isinstance(LazyCommand(name, COMMANDS[name]).real(), TyperCommand | TyperGroup)
