"""A tenant's credential file: what its holder connects with (the client, the CLI, MCP).

``python -m kbus_dev nats-auth --credential`` writes one JSON file per credential: the NATS user
JWT and seed (``creds``), the inbox its replies come to, and what its operator granted (the
tenant, libraries, rights and principals it may act for). What it names wins over what a caller
says: the server enforces it either way, and a client that agrees with it asks only what it may.
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Any, Literal

from kbus_contract.renewing import HeldCredentials
from kbus_contract.restricted import may_name_restricted
from kbus_contract.wire import describe_validation_error
from pydantic import BaseModel, ConfigDict, PrivateAttr, SecretStr, ValidationError

#: How a bearer token made from a credential begins (the format's version).
TOKEN_PREFIX = "kbus1."


class CredentialFile(BaseModel):
    """One credential as its holder keeps it (``credential-<name>.json``)."""

    model_config = ConfigDict(frozen=True)

    user: str
    #: The NATS user JWT and its seed, as a ``.creds`` file holds them.
    creds: SecretStr
    inbox_prefix: str
    tenant: str
    #: The libraries it may reach (None: all of its tenant's).
    libraries: tuple[str, ...] | None
    rights: Literal["read", "write"]
    #: The principals it may claim (None: anyone; empty: no one).
    acts_for: tuple[str, ...] | None
    bus_prefix: str
    #: The file it was read from (its operator renews the JWT there).
    _path: Path | None = PrivateAttr(default=None)

    @classmethod
    def read(cls, path: Path | str) -> CredentialFile:
        """The credential in the file at ``path`` (read again there when its JWT nears its end:
        :mod:`kbus_contract.renewing`).

        Raises:
            ValueError: in one sentence, why the file is not a credential (unreadable, not
                JSON, or which fields are missing or wrong).
        """
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ValueError(f"cannot read the credential file {path}: {exc.strerror}") from exc
        try:
            held = cls.model_validate_json(text)
        except ValidationError as exc:
            missing = [str(e["loc"][0]) for e in exc.errors() if e["type"] == "missing"]
            if missing and len(missing) == exc.error_count():
                said = "it lacks " + ", ".join(missing)
            else:
                said = describe_validation_error(exc)
            raise ValueError(
                f"{path} is not a credential file as nats-auth writes it: {said}"
            ) from None
        held._path = Path(path)
        return held

    def token(self) -> str:
        """The credential as an HTTP bearer token (``kbus token``): the console connects to NATS
        with it, so the token reaches exactly what the credential does, and ends with it. It is
        as secret as the file."""
        encoded = base64.urlsafe_b64encode(self.text().encode()).rstrip(b"=")
        return TOKEN_PREFIX + encoded.decode()

    @classmethod
    def from_token(cls, token: str) -> CredentialFile:
        """The credential a bearer token carries.

        Raises:
            ValueError: in one sentence, why it is not a kbus token.
        """
        if not token.startswith(TOKEN_PREFIX):
            raise ValueError(f"not a kbus token: it does not begin with {TOKEN_PREFIX}")
        body = token.removeprefix(TOKEN_PREFIX)
        try:
            text = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            return cls.model_validate_json(text)
        except (binascii.Error, ValueError) as exc:
            raise ValueError("not a kbus token: it does not hold a credential") from exc

    def text(self, indent: int | None = None) -> str:
        """The file's contents, the secret included (what ``nats-auth`` writes)."""
        held = self.model_dump(mode="json")
        return json.dumps({**held, "creds": self.creds.get_secret_value()}, indent=indent)

    def held(self) -> HeldCredentials:
        """Its NATS credentials, read again from its file for their renewal (a credential
        not read from a file, such as a token's, is not renewed: it ends with its JWT)."""
        path, now = self._path, self.creds.get_secret_value()
        if path is None:
            return HeldCredentials(self.creds.get_secret_value, "of this token", now)

        def read() -> str:
            again = CredentialFile.read(path)
            if again.user != self.user:
                raise ValueError(f"{path} now holds another credential")
            return again.creds.get_secret_value()

        return HeldCredentials(read, str(path), now)

    def nats_options(self, held: HeldCredentials | None = None) -> dict[str, Any]:
        """``nats.connect`` keyword arguments: the user (``held``, or as the file holds it
        now) and the inbox its replies come to."""
        return {**(held or self.held()).options(), "inbox_prefix": self.inbox_prefix}

    def names_restricted(self) -> bool:
        """Whether it reaches the records of restricted documents."""
        return may_name_restricted(self.rights == "write", self.acts_for)
