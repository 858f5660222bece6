"""NATS nkeys and JWTs (operator mode), written with ``cryptography``'s Ed25519.

An nkey is an Ed25519 key written in base32 with a role prefix (O operator, A account, U user)
and a CRC-16; its seed starts with ``S`` and the role. A JWT is ``header.claims.signature``,
each part base64url without padding, signed by the issuer's nkey (an operator signs accounts,
an account signs its users), as nats-io/jwt v2 writes them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from kbus_contract.renewing import jwt_claims

_SEED = 18 << 3
ROLES = {"operator": 14 << 3, "account": 0, "user": 20 << 3}
_HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}
#: nats-io/jwt's "no limit".
UNLIMITED = -1


def _crc16(data: bytes) -> int:
    """CRC-16/XMODEM (polynomial 0x1021, from 0), as nkeys checks it."""
    return binascii.crc_hqx(data, 0)


def _b32(raw: bytes) -> str:
    raw += _crc16(raw).to_bytes(2, "little")
    return base64.b32encode(raw).decode().rstrip("=")


def _unb32(text: str) -> bytes:
    raw = base64.b32decode(text + "=" * (-len(text) % 8))
    body, crc = raw[:-2], int.from_bytes(raw[-2:], "little")
    if _crc16(body) != crc:
        raise ValueError("not an nkey: its checksum does not match")
    return body


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


#: The letter after a seed's ``S``, by role (an nkey's prefix byte, as base32 writes it).
_SEED_ROLES = {"SO": "operator", "SA": "account", "SU": "user"}


@dataclass(frozen=True)
class NKey:
    """An nkey pair: its role and its seed (text, ``S`` and the role's letter first). The seed
    is decoded, checked and the public key derived when first used: an installation's key file
    of 30,000 tenants loads without deriving keys that a change does not touch."""

    role: str
    seed: str

    @classmethod
    def new(cls, role: str) -> NKey:
        raw = Ed25519PrivateKey.generate().private_bytes_raw()
        prefix = ROLES[role]
        return cls(role, _b32(bytes([_SEED | prefix >> 5, (prefix & 31) << 3]) + raw))

    @classmethod
    def from_seed(cls, seed: str) -> NKey:
        role = _SEED_ROLES.get(seed[:2])
        if role is None:
            raise ValueError("not an nkey seed")
        return cls(role, seed)

    @cached_property
    def raw(self) -> bytes:
        body = _unb32(self.seed)
        prefix = ((body[0] & 7) << 5) | (body[1] >> 3)
        if body[0] >> 3 != _SEED >> 3 or prefix != ROLES[self.role]:
            raise ValueError(f"not an {self.role} seed")
        return body[2:]

    @cached_property
    def _key(self) -> Ed25519PrivateKey:
        return Ed25519PrivateKey.from_private_bytes(self.raw)

    @cached_property
    def public(self) -> str:
        raw = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return _b32(bytes([ROLES[self.role]]) + raw)

    def sign(self, data: bytes) -> bytes:
        return self._key.sign(data)


def encode(
    claims: dict[str, Any],
    issuer: NKey,
    subject: str,
    name: str = "",
    lifetime_s: float | None = None,
) -> str:
    """A JWT of ``claims`` (its ``nats`` part) about ``subject``, signed by ``issuer``; ending
    ``lifetime_s`` from now (None: never)."""
    now = int(time.time())
    body: dict[str, Any] = {"iat": now, "iss": issuer.public, "sub": subject}
    if lifetime_s is not None:
        body["exp"] = now + max(1, round(lifetime_s))
    if name:
        body["name"] = name
    body["nats"] = {**claims, "version": 2}
    digest = hashlib.new("sha512_256", json.dumps(body, separators=(",", ":")).encode())
    body = {"jti": base64.b32encode(digest.digest()).decode().rstrip("="), **body}
    signed = _b64(json.dumps(_HEADER).encode()) + "." + _b64(json.dumps(body).encode())
    return signed + "." + _b64(issuer.sign(signed.encode()))


#: A JWT's claims (not verified: for reading what kbus itself wrote).
decode = jwt_claims


def creds(user_jwt: str, user: NKey) -> str:
    """A ``.creds`` file: what a client connects with (nats-py reads it, in memory or on disk)."""
    return (
        f"-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n\n"
        f"-----BEGIN USER NKEY SEED-----\n{user.seed}\n------END USER NKEY SEED------\n\n"
        "*************************************************************\n"
    )


def nats_limits(jetstream: bool) -> dict[str, Any]:
    """An account's limits: none on connections and messages; JetStream only if it holds
    kbus's streams (tenants have none: they reach kbus only through its exports)."""
    limits: dict[str, Any] = dict.fromkeys(
        ("subs", "data", "payload", "imports", "exports", "conn", "leaf"), UNLIMITED
    )
    limits["wildcards"] = True
    if jetstream:
        limits |= dict.fromkeys(("mem_storage", "disk_storage", "streams", "consumer"), UNLIMITED)
    return limits
