"""A credential file that is not one says so in one sentence naming what is wrong: never a
validation dump with its links."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kbus_client import CredentialFile


def test_a_file_missing_fields_names_them(tmp_path: Path) -> None:
    path = tmp_path / "credential.json"
    path.write_text(json.dumps({"user": "acme-hr", "inbox_prefix": "_INBOX_acme-hr"}))
    with pytest.raises(ValueError, match=r"is not a credential file .*: it lacks creds, ") as e:
        CredentialFile.read(path)
    assert "\n" not in str(e.value)
    assert "http" not in str(e.value)


def test_a_file_that_is_not_json_or_not_there_says_so(tmp_path: Path) -> None:
    path = tmp_path / "credential.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match=r"is not a credential file .*Invalid JSON"):
        CredentialFile.read(path)
    with pytest.raises(ValueError, match=r"cannot read the credential file .*No such file"):
        CredentialFile.read(tmp_path / "absent.json")
