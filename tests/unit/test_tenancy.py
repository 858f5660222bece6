"""Tenants and libraries as subject tokens: what a subject says, and what a body may claim."""

from __future__ import annotations

import pytest
from kbus_contract.errors import PermanentError
from kbus_contract.tenancy import (
    GRANT_ALL,
    Identity,
    grant_token,
    require_acts_for,
    require_granted,
    require_library,
    require_tenant,
)
from kbus_contract.topology import Topology
from kbus_dev.natsauth import Credential

T = Topology()
P = Topology("p")


def test_a_tenant_s_subjects_carry_it_and_its_library() -> None:
    assert T.added("acme", "hr") == "document.added.acme.hr"
    assert P.deleted("acme") == "p.document.deleted.acme"
    assert T.asked("kb.search", "acme", grant_token(["hr", "faq"])) == "kb.search.acme.faq+hr"
    assert T.dead_letter("ingestor") == "deadletter.ingestor._._"
    assert T.dead_letters_of("acme") == "deadletter.*.acme.*"


@pytest.mark.parametrize(
    ("topology", "subject", "identity"),
    [
        (T, "document.added.acme.hr", Identity("acme", "hr")),
        (T, "document.deleted.acme", Identity("acme")),
        (P, "p.document.removed.acme.hr", Identity("acme", "hr")),
        (T, "kb.search.acme._all", Identity("acme", grant=GRANT_ALL)),
        (T, "kb.stats.acme.faq+hr", Identity("acme", grant="faq+hr")),
        (T, "deadletter.embedder.acme._", Identity("acme")),
        (T, "document.added.a.b.c", Identity()),  # too many tokens: names no one
        (T, "chunks.ready", Identity()),
        (P, "document.added.acme.hr", Identity()),  # another installation's
    ],
)
def test_the_identity_a_subject_names(topology: Topology, subject: str, identity: Identity) -> None:
    assert topology.identity(subject) == identity


def test_a_grant_reaches_its_libraries_only() -> None:
    assert Identity("acme", grant=GRANT_ALL).libraries() is None
    assert Identity("acme", grant="faq+hr").libraries() == frozenset({"faq", "hr"})
    with pytest.raises(ValueError, match="1 to 32"):
        grant_token([f"lib{i}" for i in range(33)])


def test_a_body_must_name_its_subject_s_tenant_and_library() -> None:
    sent = T.identity("document.added.acme.hr")
    require_library(sent, "acme", "hr")
    with pytest.raises(PermanentError) as tenant:
        require_library(sent, "globex", "hr")
    assert tenant.value.code == "tenant_mismatch"
    assert "globex" in tenant.value.reason
    with pytest.raises(PermanentError) as library:
        require_library(sent, "acme", "finance")
    assert library.value.code == "library_mismatch"
    # A library's subject never deletes the whole tenant.
    with pytest.raises(PermanentError, match="whole tenant"):
        require_library(T.identity("document.deleted.acme.hr"), "acme", None)
    with pytest.raises(PermanentError, match="names no tenant"):
        require_tenant(Identity(), "acme")


def test_a_search_beyond_its_grant_is_refused_naming_the_library() -> None:
    sent = T.identity("kb.search.acme.faq+hr")
    require_granted(sent, ["faq"])
    with pytest.raises(PermanentError) as refused:
        require_granted(sent, ["faq", "finance"])
    assert refused.value.code == "library_not_granted"
    assert "'finance'" in refused.value.reason
    require_granted(T.identity("kb.search.acme._all"), ["anything"])


def test_credentials_are_read_from_the_command_line() -> None:
    assert Credential.parse("acme") == Credential("acme", "acme")
    limited = Credential.parse("support=acme:hr+faq:read")
    assert limited == Credential("support", "acme", ("faq", "hr"), write=False)
    assert limited.grant == "faq+hr"
    for bad in ("a.b", "x=acme:lib.one", "searcher=acme"):
        with pytest.raises(ValueError, match="not a valid"):
            Credential.parse(bad)


def test_whom_a_credential_may_act_for_is_part_of_its_grant() -> None:
    bot = Credential.parse("bot=acme:faq:read:as=support+sales")
    assert bot.acts_for == ("sales", "support")
    assert bot.grant == "faq~sales+support"
    sent = T.identity(T.asked("kb.search", "acme", bot.grant))
    assert sent.libraries() == frozenset({"faq"})
    assert sent.acts_for() == frozenset({"sales", "support"})
    require_acts_for(sent, ["support"])
    with pytest.raises(PermanentError) as refused:
        require_acts_for(sent, ["support", "finance"])
    assert refused.value.code == "principal_not_granted"
    assert "'finance'" in refused.value.reason
    assert "sales, support" in refused.value.reason
    ops = Credential.parse("ops=acme:read:as=*")
    assert ops.acts_for is None
    assert ops.grant == "_all~_any"
    require_acts_for(T.identity(T.asked("kb.search", "acme", ops.grant)), ["anyone:at.all"])
    # Without a bound a credential claims no one, and its grant is the plain one.
    plain = T.identity("kb.search.acme._all")
    assert plain.acts_for() == frozenset()
    require_acts_for(plain, [])
    with pytest.raises(PermanentError, match="no one"):
        require_acts_for(plain, ["support"])
    for bad in (["has.dot"], ["sp ace"], [f"g{i}" for i in range(17)]):
        with pytest.raises(ValueError, match="acts for 1 to 16"):
            grant_token(None, bad)
