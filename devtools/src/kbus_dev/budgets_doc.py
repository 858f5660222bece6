"""The table of every budget, generated into docs/security.md from
:data:`kbus_runtime.budgets.RESOURCES` (a resource added to the code changes it, and the unit
test fails until the docs say it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kbus_runtime.budgets import table

from kbus_dev import docblocks

PAGE = Path("docs/security.md")
BLOCK = "budgets"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbus_dev budgets-doc")
    parser.add_argument("--check", action="store_true", help="fail if the docs are out of date")
    args = parser.parse_args(argv)
    return docblocks.update(PAGE, BLOCK, table(), check=args.check)
