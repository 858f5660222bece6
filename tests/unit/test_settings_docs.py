"""Numbers live in docs, once: settings say what they do and point to why; the pointers hold."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kbus_dev.settings_doc import env_names

ROOT = Path(__file__).resolve().parents[2]
TUNING = ROOT / "docs" / "tuning.md"
SOURCES = ["services", "shared", "models", "client", "cli", "devtools"]
MAX_DESCRIPTION = 200


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _headings() -> dict[str, str]:
    found = re.findall(r"^#+ (.+)$", TUNING.read_text(), re.M)
    return {_anchor(h): h for h in found}


def _descriptions() -> dict[str, str]:
    out: dict[str, str] = {}
    for name, cls in env_names().items():
        field = name.removeprefix(str(cls.model_config.get("env_prefix", ""))).lower()
        out[name] = cls.model_fields[field].description or ""
    return out


@pytest.mark.parametrize("name", sorted(env_names()))
def test_a_setting_says_what_it_does_in_few_words(name: str) -> None:
    description = _descriptions()[name]
    assert description, f"{name} has no description"
    assert len(description) <= MAX_DESCRIPTION, f"{name}: {len(description)} characters"


def test_every_pointer_from_a_setting_names_a_heading_of_the_tuning_page() -> None:
    headings = _headings()
    pointers = {
        name: anchor
        for name, text in _descriptions().items()
        for anchor in re.findall(r"docs/tuning\.md#([\w-]+)", text)
    }
    assert len(pointers) >= 10  # the settings chosen by a measurement say where it is
    missing = {name: a for name, a in pointers.items() if a not in headings}
    assert not missing


def test_every_pointer_from_the_code_names_a_heading_of_the_tuning_page() -> None:
    titles = set(_headings().values())
    cited = set()
    for folder in SOURCES:
        for path in (ROOT / folder).rglob("*.py"):
            text = re.sub(r"\s+", " ", path.read_text())
            cited |= {(path.name, t) for t in re.findall(r'docs/tuning\.md, "([^"]+)"', text)}
    assert cited
    assert not {(file, title) for file, title in cited if title not in titles}


def test_the_code_cites_no_bench_run() -> None:
    runs = re.compile(r"\bruns? [A-Z]{1,2}\b")
    cited = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in SOURCES
        for path in (ROOT / folder).rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if runs.search(line)
    ]
    assert not cited
