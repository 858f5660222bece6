"""Who a caller reads as: everyone's documents, and those of the principals it acts for.

A request names the principals (users and groups) of the person an agent acts for; its
subject's grant bounds which it may name (:func:`kbus_contract.tenancy.require_acts_for`). The
store query keeps only chunks whose ``access`` names one of the readers, so k, no-match,
cursors and counts are those of what the caller may read.
"""

from __future__ import annotations

from collections.abc import Iterable

from kbus_contract.identifiers import EVERYONE
from kbus_contract.tenancy import Identity, require_acts_for, require_granted, require_tenant

from kbus_searcher.store import Scope


def readers_of(sent: Identity, principals: Iterable[str]) -> tuple[str, ...]:
    """The readers a request may search as, or ``principal_not_granted`` naming what its
    credential may not claim."""
    claimed = tuple(dict.fromkeys(principals))
    require_acts_for(sent, claimed)
    return (EVERYONE, *claimed)


def scope_of(
    sent: Identity, tenant: str, libraries: Iterable[str] | None, principals: Iterable[str] = ()
) -> Scope:
    """The scope of a caller's request, checked against the subject it came on: its tenant is
    the subject's, the libraries it names within the grant (None: every library the grant
    reaches), the principals it claims within the credential's bound."""
    require_tenant(sent, tenant)
    named: tuple[str, ...] | None = None
    if libraries is not None:
        named = tuple(libraries)
        require_granted(sent, named)
    elif (granted := sent.libraries()) is not None:
        named = tuple(sorted(granted))
    return Scope.of_caller(tenant, named, readers_of(sent, principals))
