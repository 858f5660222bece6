"""``kbus token``: a credential as a bearer token for kbus's HTTP API."""

from __future__ import annotations

from kbus_cli import common


def token() -> None:
    """Print the credential given with --credential as a bearer token for the HTTP API
    (Authorization: Bearer <token>): it reaches exactly what the credential does, ends when
    the credential is narrowed or revoked, and is as secret as the credential file."""
    held = common.access.credential
    if held is None:
        common.fail("give the credential to make a token of with --credential (KBUS_CREDENTIAL)")
    common.out.print(held.token(), soft_wrap=True, highlight=False)
