"""Fetching pages from a real web server on 127.0.0.1 (allow-listed here): redirects, sizes,
content types and robots.txt."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kbus_contract import ContentType
from kbus_contract.errors import PermanentError
from kbus_ingestor.fetching import AddressPolicy, PageFetcher

from tests.webserver import Site, serve

PAGE = b"<html><head><title>Opening hours</title></head><body><h1>Hours</h1><p>Open 9 to 5.</p>"


@pytest.fixture
def site() -> Iterator[Site]:
    site = Site()
    site.pages["/hours.html"] = ("text/html; charset=utf-8", PAGE)
    site.pages["/moved"] = ("text/plain", b"")
    site.pages["/big.html"] = ("text/html", b"<p>" + b"y" * 300_000)
    site.pages["/photo.png"] = ("image/png", b"\x89PNG")
    site.pages["/private/salaries.html"] = ("text/html", b"<p>secret</p>")
    with serve(site):
        yield site


def _fetcher(allow: tuple[str, ...] = ("127.0.0.1/32",)) -> PageFetcher:
    return PageFetcher(
        AddressPolicy(allow), max_bytes=100_000, max_redirects=5, timeout_s=10, user_agent="kb"
    )


async def test_a_page_is_fetched_with_its_type(site: Site) -> None:
    page = await _fetcher().fetch(f"{site.url}/hours.html")
    assert (page.content_type, page.data, page.url) == (
        ContentType.HTML,
        PAGE,
        f"{site.url}/hours.html",
    )


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/hop/0", "too_many_redirects"),
        ("/big.html", "too_large"),
        ("/endless", "too_large"),
        ("/photo.png", "unsupported_content_type"),
        ("/missing", "fetch_failed"),
        ("/private/salaries.html", "robots_disallowed"),
    ],
)
async def test_pages_past_the_limits_are_refused_with_the_reason(
    site: Site, path: str, code: str
) -> None:
    with pytest.raises(PermanentError) as caught:
        await _fetcher().fetch(site.url + path)
    assert caught.value.code == code, caught.value
    if code == "too_many_redirects":
        assert site.asked.count("/robots.txt") == 1  # read once per site, then cached
        assert [p for p in site.asked if p.startswith("/hop/")] == [f"/hop/{n}" for n in range(6)]
    if code == "robots_disallowed":
        assert path not in site.asked


async def test_loopback_is_refused_unless_allow_listed(site: Site) -> None:
    with pytest.raises(PermanentError) as caught:
        await _fetcher(allow=()).fetch(f"{site.url}/hours.html")
    assert caught.value.code == "address_refused"
    assert site.asked == []  # refused before any connection
