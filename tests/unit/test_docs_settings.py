"""Every setting the docs, the README and the deployment files name with a value is one kbus
reads, and the value is one its settings class accepts (a renamed setting or a removed choice
fails here, not on a user's machine)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from kbus_dev.settings_doc import env_names
from pydantic import ValidationError

ROOT = Path(__file__).resolve().parents[2]
#: Read by the CLI and the client, not by a service's settings.
CLIENT_SIDE = {"KBUS_CREDENTIAL"}
#: ``KBUS_X=value``, or ``KBUS_X: value`` in YAML (a stream's name followed by a colon in prose
#: is not a setting: its value would start a sentence).
ASSIGNED = re.compile(r"\b(KBUS_[A-Z0-9_]+)(?:=|: (?=[\"'\w./:-]+$))[\"']?([^\s\"'`|,)]+)", re.M)
#: Placeholders the docs write where a value goes.
PLACEHOLDERS = {"host:rest:grpc"}


def _named() -> list[tuple[str, str, str]]:
    """(file, variable, value) of every ``KBUS_X=value`` or ``KBUS_X: value`` written."""
    files = [ROOT / "README.md", ROOT / "docker-compose.yml", *sorted((ROOT / "docs").glob("*.md"))]
    files += sorted((ROOT / "deploy").rglob("*.yaml"))
    found = []
    for file in files:
        for name, value in ASSIGNED.findall(file.read_text()):
            found.append((str(file.relative_to(ROOT)), name, value))
    return found


def test_the_docs_name_settings_with_values() -> None:
    assert len(_named()) > 20


@pytest.mark.parametrize(("file", "name", "value"), _named())
def test_each_setting_the_docs_name_takes_the_value_they_give(
    file: str, name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if name in CLIENT_SIDE:
        return
    readers = env_names()
    assert name in readers, f"{file} names {name}, which no service reads"
    if value.startswith("$") or value in PLACEHOLDERS:
        return  # a shell or compose substitution
    for key in [k for k in os.environ if k.startswith("KBUS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv(name, value)
    try:
        readers[name]()
    except ValidationError as exc:
        pytest.fail(f"{file}: {name}={value} is refused: {exc.errors()[0]['msg']}")
