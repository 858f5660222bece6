"""Who connects: the services' users, tenants' credentials, and what a user may do."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kbus_contract.restricted import may_name_restricted
from kbus_contract.tenancy import grant_token

SERVICES = ("admin", "gateway", "ingestor", "generator", "embedder", "searcher", "reranker")
#: The account of kbus's services, streams and stores.
KBUS_ACCOUNT = "KBUS"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
#: The system account and its user, which pushes and removes accounts (operator mode).
SYSTEM_ACCOUNT, SYSTEM_USER = "SYS", "system"
_RESERVED = {*SERVICES, KBUS_ACCOUNT, SYSTEM_ACCOUNT, SYSTEM_USER}


@dataclass(frozen=True)
class Credential:
    """A tenant's credential: which tenant, which of its libraries (None: all), whether it
    may write (publish and delete documents) or only read (search, statistics, receipts), and
    for whom it may act (the principals a search may claim; None: anyone; empty: no one)."""

    name: str
    tenant: str
    libraries: tuple[str, ...] | None = None
    write: bool = True
    acts_for: tuple[str, ...] | None = ()

    @classmethod
    def parse(cls, text: str) -> Credential:
        """``NAME=TENANT[:LIB+LIB...][:read|write][:as=P+P...|as=*]``, or just ``TENANT``
        (named as it, every library, read and write, acting for no one)."""
        name, _, rest = text.partition("=") if "=" in text else (text, "", text)
        tenant, *more = rest.split(":")
        libraries: tuple[str, ...] | None = None
        write = True
        acts_for: tuple[str, ...] | None = ()
        for part in more:
            if part in ("read", "write"):
                write = part == "write"
            elif part.startswith("as="):
                bound = part.removeprefix("as=")
                acts_for = None if bound == "*" else tuple(sorted(set(bound.split("+"))))
            elif part and part != "*":
                libraries = tuple(sorted(set(part.split("+"))))
        for token in (name, tenant, *(libraries or ())):
            if not _NAME.match(token) or token in _RESERVED:
                raise ValueError(f"{token!r} is not a valid credential, tenant or library name")
        grant_token(libraries, acts_for)  # the grant fits in a subject
        return cls(name, tenant, libraries, write, acts_for)

    @property
    def spec(self) -> str:
        """What :meth:`parse` reads back as this credential."""
        libraries = "+".join(self.libraries) if self.libraries is not None else "*"
        rights = "write" if self.write else "read"
        acts = self.acts_for
        bound = "" if acts == () else ":as=" + ("*" if acts is None else "+".join(acts))
        return f"{self.name}={self.tenant}:{libraries}:{rights}{bound}"

    @property
    def grant(self) -> str:
        return grant_token(self.libraries, self.acts_for)

    @property
    def names_restricted(self) -> bool:
        """Whether it reaches what names restricted documents (their receipts, dead letters and
        feed)."""
        return may_name_restricted(self.write, self.acts_for)


@dataclass
class Permissions:
    """What one user may do."""

    publish: list[str] = field(default_factory=list)
    subscribe: list[str] = field(default_factory=list)
    allow_responses: bool = False


def inbox(user: str) -> str:
    """The inbox prefix a user's connections must use."""
    return f"_INBOX_{user}"
