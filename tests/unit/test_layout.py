"""Rules of the layout that no linter checks: where test helpers live."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_test_module_imports_from_another_test_module() -> None:
    """Shared helpers live in tests/helpers.py or a conftest, never in another test's module."""
    borrowed = re.compile(r"^\s*(from|import) tests(\.\w+)*\.test_\w+", re.M)
    offenders = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("*.py")
        if borrowed.search(path.read_text())
    ]
    assert not offenders


def test_error_codes_are_made_and_compared_only_through_the_enum() -> None:
    """A code is an ``ErrorCode`` wherever it is made or compared, never a string written out."""
    literal = re.compile(r"\bcode\s*(=|==|!=|in)\s*\(?\s*f?\"")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("services", "shared", "client", "cli")
        for path in (ROOT / folder).rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if literal.search(line)
    ]
    assert not offenders


def test_chunks_are_read_only_through_a_scoped_view() -> None:
    """Every read of the index goes through kbus_searcher.store.view (a view built from whom the
    read is for); the kinds of search it runs are in store/queries.py, and the indexer's
    writer reads only what it orders publishes by (store/writes.py, its named exception).
    Nothing else of the searcher asks Weaviate a query, an aggregate or a walk."""
    reads = re.compile(r"\.(query|aggregate)\.|\.iterator\(")
    allowed = {"view.py", "queries.py", "writes.py"}
    searcher = ROOT / "services" / "searcher" / "src" / "kbus_searcher"
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in searcher.rglob("*.py")
        if not (path.parent.name == "store" and path.name in allowed)
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if reads.search(line)
    ]
    assert not offenders
    view = (searcher / "store" / "view.py").read_text()
    handles = view.count("await self._handle()")
    held = view.count("self.scope.held(") + view.count("filters=self.scope.where()")
    assert held >= handles  # every query of the view holds its scope's filter
