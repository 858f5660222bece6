"""The address check refuses what is not public before any connection is made."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from kbus_contract.errors import PermanentError
from kbus_ingestor.fetching import AddressPolicy, PageFetcher


def _resolver(answers: dict[str, list[str]]) -> Any:
    async def resolve(host: str, port: int) -> list[str]:
        return answers[host]

    return resolve


NAMES = {
    "intranet.example": ["10.0.0.1"],
    "metadata.example": ["169.254.169.254"],
    "router.example": ["192.168.1.1"],
    "local.example": ["127.0.0.1"],
    "v6local.example": ["::1"],
    "mixed.example": ["93.184.216.34", "10.1.2.3"],
    "public.example": ["93.184.216.34"],
}


@pytest.mark.parametrize(
    ("host", "kind"),
    [
        ("intranet.example", "a private"),
        ("metadata.example", "a link-local"),
        ("router.example", "a private"),
        ("local.example", "a loopback"),
        ("v6local.example", "a loopback"),
        ("mixed.example", "a private"),  # one private address is enough to refuse
    ],
)
async def test_addresses_that_are_not_public_are_refused(host: str, kind: str) -> None:
    policy = AddressPolicy(resolver=_resolver(NAMES))
    with pytest.raises(PermanentError, match=f"resolves to .*{kind} address") as caught:
        await policy.check(f"http://{host}/page")
    assert caught.value.code == "address_refused"


async def test_public_and_allow_listed_addresses_pass_and_are_what_is_connected_to() -> None:
    policy = AddressPolicy(allow=("127.0.0.0/8", "intranet.example"), resolver=_resolver(NAMES))
    assert await policy.check("https://public.example/a") == "93.184.216.34"
    assert await policy.check("http://local.example:8080/") == "127.0.0.1"
    assert await policy.check("http://intranet.example/") == "10.0.0.1"
    with pytest.raises(PermanentError):
        await policy.check("http://metadata.example/latest/meta-data/")
    with pytest.raises(PermanentError, match="not an http"):
        await policy.check("file:///etc/passwd")


async def test_a_refused_page_is_never_connected_to(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[str] = []

    async def send(self: httpx.AsyncClient, request: httpx.Request, **_: Any) -> Any:
        attempts.append(str(request.url))
        raise AssertionError("a connection was attempted")

    monkeypatch.setattr(httpx.AsyncClient, "send", send)
    fetcher = PageFetcher(
        AddressPolicy(resolver=_resolver(NAMES)),
        max_bytes=1024,
        max_redirects=3,
        timeout_s=5,
        user_agent="kbus-test",
    )
    for host in ("intranet.example", "metadata.example", "local.example"):
        with pytest.raises(PermanentError) as caught:
            await fetcher.fetch(f"http://{host}/")
        assert caught.value.code == "address_refused"
    assert attempts == []
