"""The docs' tables of what the code declares once, each generated from its registry: every
budget (docs/security.md, from :data:`kbus_runtime.budgets.RESOURCES`) and every document
format (docs/formats.md, from :data:`kbus_contract.formats.FORMATS`). An entry added to a
registry changes its table, and the unit tests fail until the docs say it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from kbus_contract.formats import FORMATS
from kbus_runtime.budgets import table as budgets_table

from kbus_dev import docblocks


def formats_table() -> str:
    """The docs' table of every format (docs/formats.md, "Formats and sources")."""
    rows = [
        "| format | `content_type` | file endings | how it travels | from a URL |",
        "| --- | --- | --- | --- | --- |",
    ]
    for content_type, f in FORMATS.items():
        travels = (
            "by claim check (bytes)"
            if f.binary
            else "as text, with a `template`"
            if f.records
            else "as text (or by claim check)"
        )
        served = ", ".join(f"`{m}`" for m in f.served_as)
        fetched = f"yes{' (also ' + served + ')' if served else ''}" if f.fetched else "no"
        endings = ", ".join(f"`{e}`" for e in f.extensions)
        rows.append(f"| {f.name} | `{content_type.value}` | {endings} | {travels} | {fetched} |")
    return "\n".join(rows)


#: (page, block) -> its table.
TABLES: dict[tuple[Path, str], Callable[[], str]] = {
    (Path("docs/security.md"), "budgets"): budgets_table,
    (Path("docs/formats.md"), "formats"): formats_table,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbus_dev tables-doc")
    parser.add_argument("--check", action="store_true", help="fail if the docs are out of date")
    args = parser.parse_args(argv)
    return max(
        docblocks.update(page, block, table(), check=args.check)
        for (page, block), table in TABLES.items()
    )
