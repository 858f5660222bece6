"""Fetching a web page a document names by its address, safely.

Every hop (the page, each redirect, robots.txt) is resolved first and refused unless all its
addresses are public or allow-listed; the connection then goes to the address that was checked
(the host name only names the TLS certificate and the Host header), so a name that resolves
again to a private address cannot slip in between the check and the request.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
import urllib.robotparser
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx
from kbus_contract import ContentType
from kbus_contract.errors import ErrorCode, PermanentError, TransientError
from kbus_contract.formats import by_media_type

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: Resolves a host and port to its addresses (a stub in tests of the refusal).
Resolver = Callable[[str, int], Awaitable[list[str]]]

#: Content types a fetched page may have, and what it is parsed as.
FETCHED_TYPES = by_media_type()


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class AddressPolicy:
    """Which hosts may be fetched: public addresses, and what the allow-list names (host
    names, addresses or networks such as ``127.0.0.1/32``)."""

    allow: Sequence[str] = ()
    resolver: Resolver = system_resolver

    async def check(self, url: str) -> str:
        """The address to connect to for ``url``.

        Raises:
            PermanentError: not http(s), or an address is neither public nor allowed; raised
                before any connection is made.
            TransientError: the name does not resolve now.
        """
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PermanentError(f"{url} is not an http(s) address", code=ErrorCode.ADDRESS_REFUSED)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            found = await self.resolver(parts.hostname, port)
        except OSError as exc:
            raise TransientError(f"{parts.hostname} does not resolve: {exc}") from exc
        addresses = [ipaddress.ip_address(a.split("%")[0]) for a in found]
        if not addresses:
            raise TransientError(f"{parts.hostname} has no address")
        for address in addresses:
            if not address.is_global and not self._allowed(parts.hostname, address):
                raise PermanentError(
                    f"{url} resolves to {address}, {_kind(address)} address; only public "
                    "addresses are fetched unless the allow-list names them",
                    code=ErrorCode.ADDRESS_REFUSED,
                )
        return str(addresses[0])

    def _allowed(self, host: str, address: IPAddress) -> bool:
        for entry in self.allow:
            if entry == host:
                return True
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
        return False


def _kind(address: IPAddress) -> str:
    if address.is_loopback:
        return "a loopback"
    if address.is_link_local:
        return "a link-local"
    if address.is_private:
        return "a private"
    return "a non-public"


@dataclass(frozen=True)
class Fetched:
    """A fetched page: where it was found at last, its type and its bytes."""

    url: str
    content_type: ContentType
    data: bytes


@dataclass
class PageFetcher:
    """Fetches pages within a time, a size, a number of redirects, and robots.txt."""

    policy: AddressPolicy
    max_bytes: int
    max_redirects: int
    timeout_s: float
    user_agent: str
    robots_ttl_s: float = 3600.0
    _robots: dict[str, tuple[float, urllib.robotparser.RobotFileParser]] = field(
        default_factory=dict
    )

    async def fetch(self, url: str) -> Fetched:
        """The page at ``url``, after redirects.

        Raises:
            PermanentError: refused address, disallowed by robots.txt, too many redirects,
                too large, an unsupported content type, or an error status but 408/429/5xx.
            TransientError: the server did not answer in time, or answered 408, 429 or 5xx.
        """
        try:
            async with (
                asyncio.timeout(self.timeout_s),
                # One client for every hop of a fetch (robots.txt and the page share its
                # connections); each request goes to the address its own check returned.
                httpx.AsyncClient(follow_redirects=False, trust_env=False) as client,
            ):
                return await self._follow(client, url)
        except TimeoutError as exc:
            raise TransientError(f"{url} did not answer within {self.timeout_s:g} s") from exc

    async def _follow(self, client: httpx.AsyncClient, url: str) -> Fetched:
        for _ in range(self.max_redirects + 1):
            await self._check_robots(client, url)
            status, headers, data = await self._get(client, url, self.max_bytes)
            if status in (301, 302, 303, 307, 308) and "location" in headers:
                url = urljoin(url, headers["location"])
                continue
            _check_status(url, status)
            return Fetched(url, _content_type(url, headers), data)
        raise PermanentError(
            f"{url} redirects more than {self.max_redirects} times",
            code=ErrorCode.TOO_MANY_REDIRECTS,
        )

    async def _get(
        self, client: httpx.AsyncClient, url: str, limit: int
    ) -> tuple[int, httpx.Headers, bytes]:
        address = await self.policy.check(url)
        parts = urlsplit(url)
        host = f"[{address}]" if ":" in address else address
        pinned = urlunsplit(parts._replace(netloc=f"{host}:{parts.port or ''}".rstrip(":")))
        headers = {"Host": parts.netloc, "User-Agent": self.user_agent}
        request = client.build_request(
            "GET", pinned, headers=headers, extensions={"sni_hostname": parts.hostname}
        )
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise TransientError(f"{url} could not be fetched: {exc}") from exc
        try:
            return response.status_code, response.headers, await _read(response, url, limit)
        finally:
            await response.aclose()

    async def _check_robots(self, client: httpx.AsyncClient, url: str) -> None:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        cached = self._robots.get(origin)
        if cached is None or time.monotonic() - cached[0] > self.robots_ttl_s:
            cached = (time.monotonic(), await self._read_robots(client, origin))
            self._robots[origin] = cached
        if not cached[1].can_fetch(self.user_agent, url):
            raise PermanentError(
                f"robots.txt of {origin} disallows {url}", code=ErrorCode.ROBOTS_DISALLOWED
            )

    async def _read_robots(
        self, client: httpx.AsyncClient, origin: str
    ) -> urllib.robotparser.RobotFileParser:
        robots = urllib.robotparser.RobotFileParser()
        status, _, data = await self._get(client, f"{origin}/robots.txt", 512 * 1024)
        if status >= 500:
            raise TransientError(f"{origin}/robots.txt answered {status}")
        # No robots.txt (or one we may not read) allows everything, as crawlers agree.
        robots.parse(data.decode("utf-8", "replace").splitlines() if status == 200 else [])
        return robots


async def _read(response: httpx.Response, url: str, limit: int) -> bytes:
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PermanentError(
            f"{url} is {declared} bytes; the limit is {limit}", code=ErrorCode.TOO_LARGE
        )
    body = bytearray()
    async for piece in response.aiter_bytes():
        body += piece
        if len(body) > limit:
            raise PermanentError(
                f"{url} is over the limit of {limit} bytes", code=ErrorCode.TOO_LARGE
            )
    return bytes(body)


def _check_status(url: str, status: int) -> None:
    if status == 200:
        return
    if status in (408, 429) or status >= 500:
        raise TransientError(f"{url} answered {status}")
    raise PermanentError(f"{url} answered {status}", code=ErrorCode.FETCH_FAILED)


def _content_type(url: str, headers: httpx.Headers) -> ContentType:
    declared = headers.get("content-type", "").split(";")[0].strip().lower()
    if declared not in FETCHED_TYPES:
        raise PermanentError(
            f"{url} is {declared or 'of no stated type'}; kbus reads "
            + ", ".join(sorted(FETCHED_TYPES)),
            code=ErrorCode.UNSUPPORTED_CONTENT_TYPE,
        )
    return FETCHED_TYPES[declared]
