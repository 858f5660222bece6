"""What a tenant's account imports from kbus's (and kbus's exports), and what each of its
users may do inside it."""

from __future__ import annotations

from typing import Any

from kbus_contract.catalog import Channel, Use, is_restricted, tenant_channels
from kbus_contract.topology import Topology

from kbus_dev.natsauth.users import Credential, Permissions, inbox


def _kind(entry: Channel) -> str:
    return "stream" if entry.use is Use.RECEIVE else "service"


def exports(t: Topology) -> list[dict[str, Any]]:
    """What kbus's account offers: each tenant-facing form with any tenant's name. An account
    takes only what its JWT imports, and the operator (kbus) signs every account's JWT with
    imports of that tenant's own subjects (:func:`imports`): the exports are the same for every
    tenant, and nothing in kbus's account grows with them."""
    return [
        {"name": entry.name, "subject": subject, "type": _kind(entry)}
        for entry in tenant_channels()
        for subject in t.forms(entry.name)
    ]


def imported(t: Topology, tenant: str) -> list[tuple[str, str, str]]:
    """A tenant's own forms of each tenant-facing subject: (channel, kind, subject)."""
    return [
        (entry.name, _kind(entry), subject)
        for entry in tenant_channels()
        for subject in t.forms(entry.name, tenant=tenant)
    ]


def imports(t: Topology, tenant: str, kbus: str) -> list[dict[str, Any]]:
    """What a tenant's account takes from kbus's (public key ``kbus``): its own forms of each
    subject, and nothing else."""
    return [
        {"name": name, "subject": subject, "account": kbus, "type": kind}
        for name, kind, subject in imported(t, tenant)
    ]


# -- a tenant's users, inside its account -------------------------------------------------------


def _is_tenant_wide(form: str) -> bool:
    return "{library}" not in form and "{grant}" not in form


def _scoped(t: Topology, entry: Channel, credential: Credential) -> list[str]:
    """A channel's subjects as one credential may use them: its tenant, its grant, each of its
    libraries (or every one), the tenant-wide forms only for a credential of every library, the
    forms for restricted documents only for a credential that may name them."""
    subjects: list[str] = []
    for library in credential.libraries or ["*"]:
        filled = t.forms(
            entry.name, tenant=credential.tenant, grant=credential.grant, library=library
        )
        for form, subject in zip(entry.forms, filled, strict=True):
            wide = _is_tenant_wide(form) and credential.libraries is not None
            hidden = is_restricted(form) and not credential.names_restricted
            if subject not in subjects and not wide and not hidden:
                subjects.append(subject)
    return subjects


def tenant_permissions(t: Topology, credential: Credential) -> Permissions:
    """What one tenant's credential may do in its tenant's account: ask and publish on its own
    subjects (writing ones, large texts' parts among them, only if it writes), listen to its own
    receipts and dead letters, and receive replies on its own inbox."""
    allowed = {Use.READ, Use.WRITE} if credential.write else {Use.READ}
    publish: list[str] = []
    subscribe = [f"{inbox(credential.name)}.>"]
    for entry in tenant_channels():
        if entry.use is Use.RECEIVE:
            subscribe += _scoped(t, entry, credential)
        elif entry.use in allowed:
            publish += _scoped(t, entry, credential)
    return Permissions(publish=publish, subscribe=subscribe)
