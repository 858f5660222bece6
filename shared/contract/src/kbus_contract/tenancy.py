"""Who a message acts for, read from its subject, and checks that its body agrees.

NATS permissions decide who may publish to ``document.added.{tenant}.{library}`` or
``kb.search.{tenant}.{grant}``; the services then hold the message's body to the subject's
:class:`Identity`. A body naming another tenant or library is refused
(``tenant_mismatch``, ``library_mismatch``); a search naming a library its grant does not
reach is refused naming it (``library_not_granted``), never silently narrowed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from kbus_contract.catalog import CHANNELS, Use, is_restricted
from kbus_contract.errors import ErrorCode, PermanentError

#: The grant token of a credential that may read every library of its tenant.
GRANT_ALL = "_all"
#: The most libraries a grant names (a longer list would make a very long subject).
MAX_GRANT_LIBRARIES = 32
#: Between a grant's libraries and whom its credential may act for (``docs~support+sales``).
ACTS_FOR = "~"
#: The bound of a credential that may act for anyone (an operator's tool).
ANYONE = "_any"
#: The most principals a credential's bound names.
MAX_BOUND_PRINCIPALS = 16
#: A principal a bound names must fit in a subject token.
BOUND_PRINCIPAL = re.compile(r"^[A-Za-z0-9_@=:-]{1,64}$")
#: The token of a tenant or library a dead letter's message did not name.
UNKNOWN = "_"
#: The channels whose subjects carry a tenant (kbus_contract.catalog).
# The subjects between the services name a tenant too (for fair share), but the services wrote
# them: who a message acts for is read from a tenant's own subjects only.
_TENANTED = tuple(
    entry for entry in CHANNELS if "tenant" in entry.tokens and entry.use is not Use.NONE
)


@dataclass(frozen=True)
class Identity:
    """Who a message acts for, as its subject says: NATS let it through to that subject only if
    the sender's credential may publish there."""

    tenant: str | None = None
    library: str | None = None
    grant: str | None = None
    #: Sent on a form for restricted documents (only a credential that may write the library,
    #: or act for anyone, may publish there).
    restricted: bool = False

    def libraries(self) -> frozenset[str] | None:
        """The libraries the grant reaches (None: all of the tenant's)."""
        libraries = (self.grant or GRANT_ALL).partition(ACTS_FOR)[0]
        if libraries == GRANT_ALL:
            return None
        return frozenset(libraries.split("+"))

    def acts_for(self) -> frozenset[str] | None:
        """The principals the credential may claim to act for (None: anyone; empty: none, so
        it reads only the documents everyone may read)."""
        bound = (self.grant or "").partition(ACTS_FOR)[2]
        if bound == ANYONE:
            return None
        return frozenset(bound.split("+")) if bound else frozenset()


def names_tenant(tokens: list[str]) -> bool:
    """Whether a subject (its tokens, without prefix) is of a kind that carries a tenant."""
    subject = ".".join(tokens)
    return any(subject.startswith(entry.kind + ".") for entry in _TENANTED)


def identity_of(tokens: list[str]) -> Identity:
    """The tenant, library and grant a subject (its tokens, without prefix) names."""
    for entry in _TENANTED:
        matched = entry.match(tokens)
        if matched is not None:
            form, found = matched
            return Identity(
                _known(found["tenant"]),
                _known(found.get("library")),
                found.get("grant"),
                is_restricted(form),
            )
    return Identity()


def _known(token: str | None) -> str | None:
    return None if token == UNKNOWN else token


def grant_token(libraries: Iterable[str] | None, acts_for: Iterable[str] | None = ()) -> str:
    """The subject token of a grant: ``_all``, or the libraries sorted and joined by ``+``;
    then, for a credential that may act for people, ``~`` and ``_any`` (``acts_for=None``) or
    the principals it may claim, sorted and joined by ``+``."""
    token = GRANT_ALL
    if libraries is not None:
        names = sorted(set(libraries))
        if not names or len(names) > MAX_GRANT_LIBRARIES:
            raise ValueError(f"a grant names 1 to {MAX_GRANT_LIBRARIES} libraries")
        token = "+".join(names)
    if acts_for is None:
        return f"{token}{ACTS_FOR}{ANYONE}"
    bound = sorted(set(acts_for))
    if not bound:
        return token
    if len(bound) > MAX_BOUND_PRINCIPALS or not all(BOUND_PRINCIPAL.match(p) for p in bound):
        raise ValueError(
            f"a credential acts for 1 to {MAX_BOUND_PRINCIPALS} principals of letters, digits "
            "and _@=:- (or for anyone)"
        )
    return f"{token}{ACTS_FOR}{'+'.join(bound)}"


def require_tenant(identity: Identity, tenant: str) -> None:
    """The body's tenant is the subject's."""
    if identity.tenant is None:
        raise PermanentError(
            "the subject names no tenant: publish to the tenant's own subject",
            code=ErrorCode.TENANT_MISMATCH,
        )
    if tenant != identity.tenant:
        raise PermanentError(
            f"the message names tenant {tenant!r} but was sent on tenant {identity.tenant!r}'s "
            "subject",
            code=ErrorCode.TENANT_MISMATCH,
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
            f"the message names {named} but was sent on {sent}", code=ErrorCode.LIBRARY_MISMATCH
        )


def require_acts_for(identity: Identity, principals: Iterable[str]) -> None:
    """Every principal claimed is one the subject's credential may act for."""
    bound = identity.acts_for()
    if bound is None:
        return
    outside = sorted(set(principals) - bound)
    if outside:
        may = ", ".join(sorted(bound)) if bound else "no one (it reads public documents only)"
        raise PermanentError(
            f"this credential may not act for {', '.join(repr(p) for p in outside)} "
            f"(it may act for {may})",
            code=ErrorCode.PRINCIPAL_NOT_GRANTED,
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
            code=ErrorCode.LIBRARY_NOT_GRANTED,
        )
