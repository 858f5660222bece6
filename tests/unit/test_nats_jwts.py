"""Operator-mode provisioning: nkeys and JWTs as nats-io writes them, and the keys of an
installation through random changes of its credential list."""

from __future__ import annotations

import argparse
import base64
import json
import random
import time
from pathlib import Path
from typing import Any

import nacl.signing
import nkeys
import pytest
from kbus_client import CredentialFile
from kbus_contract.renewing import claims_of
from kbus_contract.topology import Topology
from kbus_dev.natsauth import (
    KBUS_ACCOUNT,
    SERVICES,
    SYSTEM_ACCOUNT,
    SYSTEM_USER,
    Credential,
    Keys,
    edited,
    inbox,
    jwts,
    provision,
)
from kbus_dev.natsauth.claims import RENEW_WITHIN, account_jwt
from kbus_dev.natsauth.config import duration_s
from kbus_dev.natsauth.jwts import NKey, decode, encode
from kbus_dev.natsauth.keys import reconcile
from kbus_runtime.bus import held_credentials
from kbus_runtime.settings import BusSettings


def _public(key: str) -> nacl.signing.VerifyKey:
    raw = base64.b32decode(key + "=" * (-len(key) % 8))
    return nacl.signing.VerifyKey(raw[1:-2])  # prefix byte, key, CRC-16


def _verify(token: str) -> dict[str, Any]:
    """A JWT's claims, its signature checked with PyNaCl against its issuer's public key."""
    header, claims, signature = token.split(".")
    body = decode(token)
    raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
    _public(body["iss"]).verify(f"{header}.{claims}".encode(), raw)
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {
        "typ": "JWT",
        "alg": "ed25519-nkey",
    }
    return body


@pytest.mark.parametrize("role", ["operator", "account", "user"])
def test_nkeys_read_back_by_the_nkeys_library(role: str) -> None:
    prefix = {"operator": "O", "account": "A", "user": "U"}[role]
    for _ in range(20):
        key = NKey.new(role)
        theirs = nkeys.from_seed(key.seed.encode())
        assert theirs.public_key.decode() == key.public
        assert key.public.startswith(prefix)
        assert key.seed.startswith("S" + prefix)
        assert NKey.from_seed(key.seed) == key
        assert NKey.from_seed(key.seed).public == key.public
        flipped = key.seed[:20] + ("A" if key.seed[20] != "A" else "B") + key.seed[21:]
        with pytest.raises(ValueError, match="checksum"):
            NKey.from_seed(flipped).public  # noqa: B018 (read lazily, checked when used)
        with pytest.raises(ValueError, match="not an nkey seed"):
            NKey.from_seed("X" + key.seed[1:])
        data = random.randbytes(random.randint(0, 200))
        assert theirs.verify(data, key.sign(data))


def test_a_jwt_is_signed_by_its_issuer() -> None:
    issuer, subject = NKey.new("operator"), NKey.new("account")
    token = encode({"type": "account", "limits": {"conn": -1}}, issuer, subject.public, "acme")
    body = _verify(token)
    assert body["iss"] == issuer.public
    assert body["sub"] == subject.public
    assert body["nats"] == {"type": "account", "limits": {"conn": -1}, "version": 2}


def test_a_tenant_imports_only_its_own_subjects(tmp_path: Path) -> None:
    plan = provision(tmp_path, [Credential.parse("acme"), Credential.parse("g=globex")])
    keys, jwts = plan.keys, plan.accounts
    assert plan.changed == {KBUS_ACCOUNT, "acme", "globex"}
    kbus = keys.accounts[KBUS_ACCOUNT].public
    for tenant in ("acme", "globex"):
        account = _verify(jwts[tenant])
        assert account["iss"] == keys.operator.public
        assert account["sub"] == keys.accounts[tenant].public
        imports = account["nats"]["imports"]
        assert imports
        for entry in imports:
            assert f".{tenant}." in entry["subject"] or entry["subject"].endswith(f".{tenant}")
            assert entry["account"] == kbus
    exports = _verify(jwts[KBUS_ACCOUNT])["nats"]["exports"]
    assert "acme" not in json.dumps(exports)
    assert "globex" not in json.dumps(exports)


def _random_list(rng: random.Random) -> list[Credential]:
    tenants = rng.sample([f"t{n}" for n in range(6)], rng.randint(0, 4))
    return [
        Credential(f"{tenant}-{n}", tenant, write=rng.random() < 0.5)
        for tenant in tenants
        for n in range(rng.randint(1, 3))
    ]


def test_keys_through_random_changes_of_the_credential_list() -> None:
    """Whatever the list becomes: exactly its users (and the services') hold keys; a user that
    stays with the same rights keeps its key; one that goes, is rotated or is given other
    rights (narrowed or widened) is revoked in its account while that account stays, and an
    account whose tenant has no credential left is gone."""
    rng = random.Random(58)
    keys = Keys.new()
    given: dict[str, str] = {}
    for _ in range(100):
        credentials = _random_list(rng)
        before = dict(keys.users)
        homes = dict(keys.homes)
        rotate = rng.sample(sorted(before), min(len(before), rng.randint(0, 2)))
        reconcile(keys, credentials, rotate)
        wanted = {c.name: c.tenant for c in credentials}
        wanted |= {SYSTEM_USER: SYSTEM_ACCOUNT, **dict.fromkeys(SERVICES, KBUS_ACCOUNT)}
        specs = {c.name: c.spec for c in credentials}
        assert keys.homes == wanted
        assert set(keys.accounts) == {*wanted.values()}
        for name, key in before.items():
            same = given.get(name, "") == specs.get(name, "")
            kept = name in wanted and wanted[name] == homes[name] and name not in rotate and same
            assert (keys.users.get(name) == key) is kept
            if not kept and homes[name] in keys.accounts:
                assert key.public in keys.revoked[homes[name]]
        given = {name: specs.get(name, "") for name in keys.users}
        t = Topology()
        for account in keys.accounts:
            claims = decode(account_jwt(t, keys, account))["nats"]
            assert claims.get("revocations", {}) == keys.revoked.get(account, {})


def _user_of(path: Path) -> str:
    """The user public key of a credential file."""
    user_jwt = json.loads(path.read_text())["creds"].splitlines()[1]
    return str(decode(user_jwt)["sub"])


def test_a_run_changes_only_what_its_list_changed(tmp_path: Path) -> None:
    """Run again with the same list: nothing to push, no file rewritten; with a tenant added:
    only its account; with a credential dropped: only its tenant's account (its revocation);
    with tenants dropped: their accounts removed."""
    listed = [Credential.parse(c) for c in ("acme", "g=globex", "g2=globex")]
    first = provision(tmp_path, listed)
    files = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    again = provision(tmp_path, listed)
    assert (again.changed, again.removed) == (set(), [])
    assert [p.name for p in tmp_path.iterdir() if files.get(p.name) != p.stat().st_mtime_ns] == []
    added = provision(tmp_path, [*listed, Credential.parse("initech")])
    assert added.changed == {"initech"}
    g2 = _user_of(tmp_path / "credential-g2.json")
    dropped = provision(tmp_path, [*listed[:2], Credential.parse("initech")])
    assert dropped.changed == {"globex"}
    assert list(decode(dropped.accounts["globex"])["nats"]["revocations"]) == [g2]
    gone = provision(tmp_path, [Credential.parse("initech")])
    assert set(gone.removed) == {first.keys.accounts[t].public for t in ("acme", "globex")}
    assert sorted(gone.accounts) == [KBUS_ACCOUNT, "initech"]


def test_a_change_to_one_tenant_makes_only_its_files_and_account_again(tmp_path: Path) -> None:
    """nats-auth --add/--drop: the list changed by name; only the changed tenants' files are
    written and their accounts pushed; what the list holds equals a whole-list run's."""
    rng = random.Random(60)
    listed = [Credential.parse(f"c{n}=t{n % 7}") for n in range(20)]
    provision(tmp_path, listed)
    for _ in range(10):
        files = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
        add = [Credential.parse(f"n{rng.randint(0, 99)}=t{rng.randint(0, 9)}:read")]
        names = sorted(c.name for c in listed)
        drop = rng.sample(names, 1)
        listed, touched = edited(tmp_path, add, drop)
        plan = provision(tmp_path, listed, touched=touched)
        assert plan.changed <= touched
        for path in tmp_path.iterdir():
            if path.name.startswith(("credential-", "account-t")) and files.get(path.name) != (
                path.stat().st_mtime_ns
            ):
                tenant = json.loads(path.read_text())["tenant"] if path.suffix == ".json" else None
                assert tenant is None or tenant in touched, path.name
        assert (tmp_path / "credentials.txt").read_text().split() == [c.spec for c in listed]
        for credential in listed:
            assert (tmp_path / f"credential-{credential.name}.json").is_file()
        assert sorted(p.name for p in tmp_path.glob("credential-*.json")) == sorted(
            f"credential-{c.name}.json" for c in listed
        )


def _change_cost(out: Path, tenants: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """What adding one tenant and then dropping a credential costs an installation of
    ``tenants`` tenants: seeds decoded, directory listings, files read and written."""
    provision(out, [Credential.parse(f"t{n}") for n in range(tenants)])
    counts = dict.fromkeys(("decoded", "listed", "read", "written"), 0)

    def counted(name: str, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(jwts, "_unb32", counted("decoded", jwts._unb32))
    for name, method in (("listed", "glob"), ("listed", "iterdir"), ("read", "read_text")):
        monkeypatch.setattr(Path, method, counted(name, getattr(Path, method)))
    monkeypatch.setattr(Path, "write_text", counted("written", Path.write_text))
    for add, drop in (([Credential.parse("newcomer")], []), ([], [f"t{tenants // 2}"])):
        listed, touched = edited(out, add, drop)
        provision(out, listed, touched=touched)
    monkeypatch.undo()
    assert not (out / f"credential-t{tenants // 2}.json").exists()
    assert (out / "credential-newcomer.json").is_file()
    return counts


def test_adding_or_removing_a_tenant_costs_the_same_at_any_number_of_tenants(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nats-auth --add / --drop decode no other tenant's keys, list no directory of every
    tenant's files and read or write none of them: the same counts at 20 and at 200 tenants."""
    small = _change_cost(tmp_path / "small", 20, monkeypatch)
    large = _change_cost(tmp_path / "large", 200, monkeypatch)
    assert small == large, (small, large)


def test_what_a_credential_file_holds_is_what_its_holder_reads(tmp_path: Path) -> None:
    """Random credentials, provisioned: each file reads back (``CredentialFile``) as the
    credential its operator issued, is written exactly as it reads, and never shows its seed
    when printed."""
    rng = random.Random(11)
    listed = []
    for n in range(12):
        libraries = rng.choice(["*", "lib-a", "lib-a+lib-b"])
        rights = rng.choice(["read", "write"])
        bound = rng.choice(["", ":as=*", ":as=alice", ":as=alice+bob"])
        listed.append(Credential.parse(f"c{n}=t{n % 4}:{libraries}:{rights}{bound}"))
    provision(tmp_path, listed, prefix="pfx")
    for issued in listed:
        path = tmp_path / f"credential-{issued.name}.json"
        held = CredentialFile.read(path)
        assert (held.tenant, held.libraries, held.acts_for, held.bus_prefix) == (
            issued.tenant,
            issued.libraries,
            issued.acts_for,
            "pfx",
        )
        assert held.names_restricted() == issued.names_restricted
        assert held.text(indent=2) + "\n" == path.read_text()
        seed = held.creds.get_secret_value().split("SEED-----")[1].split()[0]
        assert seed not in repr(held) + str(held) + held.model_dump_json()
        assert held.nats_options()["inbox_prefix"] == inbox(issued.name)


def _user_jwt(path: Path) -> dict[str, Any]:
    return claims_of(CredentialFile.read(path).creds.get_secret_value())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_user_jwt_ends_and_a_renewal_issues_again_only_the_due_ones(
    tmp_path: Path, seed: int
) -> None:
    """Through random lifetimes and clocks: every user's JWT (services' and the system's too)
    ends ``lifetime`` after its issue; a run issues again, for the same key, exactly the JWTs
    with less than a third of the run's lifetime left (and leaves every other as it was)."""
    rng = random.Random(seed)
    listed = [Credential(f"c{i}", f"t{i % 3}") for i in range(6)]
    first = rng.choice([60.0, 3600.0, 86400.0])
    provision(tmp_path, listed, lifetime_s=first)
    names = [*(f"credential-{c.name}.json" for c in listed)]
    before = {n: (tmp_path / n).read_text() for n in names}
    for name in [*names, *(f"{s}.creds" for s in SERVICES), "system.creds"]:
        path = tmp_path / name
        text = path.read_text() if name.endswith(".creds") else None
        claims = claims_of(text) if text else _user_jwt(path)
        assert claims["exp"] - claims["iat"] == first, name
    lifetime = rng.choice([100.0, 4000.0, 90000.0, 300000.0])
    now = rng.uniform(0, 30000)
    clock = time.time() + now
    due_ones = {
        n for n in names if _user_jwt(tmp_path / n)["exp"] - clock < lifetime * RENEW_WITHIN
    }
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(time, "time", lambda: clock)
        plan = provision(tmp_path, listed, lifetime_s=lifetime)
    for name in names:
        after = (tmp_path / name).read_text()
        assert (after != before[name]) == (name in due_ones), name
        renewed, earlier = (
            _user_jwt(tmp_path / name),
            claims_of(CredentialFile.model_validate_json(before[name]).creds.get_secret_value()),
        )
        assert renewed["sub"] == earlier["sub"], "a renewal keeps the key: nothing is revoked"
    assert sorted(n for n in plan.reissued if n.startswith("credential-")) == sorted(due_ones)
    assert not plan.revoked


def test_a_holder_takes_only_a_later_jwt_of_its_own_key(tmp_path: Path) -> None:
    provision(tmp_path, [Credential("c", "t"), Credential("d", "t")], lifetime_s=60)
    path = tmp_path / "credential-c.json"
    texts = {"now": CredentialFile.read(path).creds.get_secret_value(), "file": path.read_text()}
    held = CredentialFile.read(path).held()
    assert held.expires_at == claims_of(texts["now"])["exp"]
    assert not held.renewed(), "the same JWT is no renewal"
    other = CredentialFile.read(tmp_path / "credential-d.json").text()
    path.write_text(other)
    assert not held.renewed(), "another credential's file is not this one's renewal"
    path.write_text("{")
    assert not held.renewed(), "a file being written is looked at again later"
    path.write_text(texts["file"])
    with pytest.MonkeyPatch.context() as patched:
        later = time.time() + 55
        patched.setattr(time, "time", lambda: later)
        provision(tmp_path, [Credential("c", "t"), Credential("d", "t")], lifetime_s=60)
    assert held.renewed()
    assert held.expires_at == claims_of(held.text)["exp"] > claims_of(texts["now"])["exp"]


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("15m", 900), ("12h", 43200), ("7d", 604800)]
)
def test_a_lifetime_reads_as_seconds(text: str, seconds: float) -> None:
    assert duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "7", "d", "0d", "-1d", "1.5h", "7w"])
def test_a_lifetime_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration_s(text)


def test_a_service_holds_its_credentials_file_or_says_in_one_sentence_why_not(
    tmp_path: Path,
) -> None:
    provision(tmp_path, [Credential("c", "t")], lifetime_s=3600)
    path = tmp_path / "gateway.creds"
    held = held_credentials(BusSettings(nats_credentials_file=str(path)))
    assert held is not None
    assert held.text == path.read_text()
    assert held.expires_at == claims_of(path.read_text())["exp"]
    for wrong in (tmp_path / "missing.creds", tmp_path / "keys.json"):
        with pytest.raises(ValueError, match=r"^KBUS_NATS_CREDENTIALS_FILE .* holds no NATS") as e:
            held_credentials(BusSettings(nats_credentials_file=str(wrong)))
        assert "\n" not in str(e.value)
    assert held_credentials(BusSettings()) is None
