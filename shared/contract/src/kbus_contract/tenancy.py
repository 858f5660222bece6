"""Checks that a message acts for the tenant and libraries its subject names.

NATS permissions decide who may publish to ``document.added.{tenant}.{library}`` or
``kb.search.{tenant}.{grant}``; the services then hold the message's body to the subject's
:class:`~kbus_contract.topology.Identity`. A body naming another tenant or library is refused
(``tenant_mismatch``, ``library_mismatch``); a search naming a library its grant does not
reach is refused naming it (``library_not_granted``), never silently narrowed.
"""

from __future__ import annotations

from collections.abc import Iterable

from kbus_contract.errors import PermanentError
from kbus_contract.topology import Identity


def require_tenant(identity: Identity, tenant: str) -> None:
    """The body's tenant is the subject's."""
    if identity.tenant is None:
        raise PermanentError(
            "the subject names no tenant: publish to the tenant's own subject",
            code="tenant_mismatch",
        )
    if tenant != identity.tenant:
        raise PermanentError(
            f"the message names tenant {tenant!r} but was sent on tenant {identity.tenant!r}'s "
            "subject",
            code="tenant_mismatch",
        )


def require_library(identity: Identity, tenant: str, library: str | None) -> None:
    """The body's tenant and library are the subject's (no library: a tenant-wide subject)."""
    require_tenant(identity, tenant)
    if library != identity.library:
        sent = (
            "the whole tenant's subject"
            if identity.library is None
            else (f"library {identity.library!r}'s subject")
        )
        named = "the whole tenant" if library is None else f"library {library!r}"
        raise PermanentError(
            f"the message names {named} but was sent on {sent}", code="library_mismatch"
        )


def require_granted(identity: Identity, libraries: Iterable[str]) -> None:
    """Every library asked for is within the subject's grant."""
    granted = identity.libraries()
    if granted is None:
        return
    outside = sorted(set(libraries) - granted)
    if outside:
        raise PermanentError(
            f"this credential may not read {', '.join(repr(name) for name in outside)} "
            f"(it may read {', '.join(sorted(granted))})",
            code="library_not_granted",
        )
