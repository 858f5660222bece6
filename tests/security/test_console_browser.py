"""The web console in a real browser: Debian's chromium, headless, driven through its
chromedriver (``python -m kbus_dev install --test-tools`` installs both). A person signs in with
a token, imports a Markdown file and a PDF and sees them indexed, searches and reads every
score, deletes a document; a document whose title, text, address and metadata are script runs
nothing; a form without its CSRF token changes nothing. Screenshots are kept beside the test's
temporary files (and in ``KBUS_TEST_ARTIFACTS`` when set)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fpdf import FPDF
from kbus_client import CredentialFile
from kbus_contract import LibraryProfile
from kbus_dev.browser import headless_chromium, replaced
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.security.conftest import TOPOLOGY, Locked, client_for

#: Script in every field a page shows: each sets ``window.kbusXss`` if it runs.
HOSTILE = '<script>window.kbusXss=1</script><img src=x onerror="window.kbusXss=2">'


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    driver: WebDriver = headless_chromium(1280, 1000)
    try:
        yield driver
    finally:
        driver.quit()


def _shot(driver: WebDriver, folder: Path, name: str) -> None:
    path = folder / f"console-{name}.png"
    driver.save_screenshot(str(path))
    if os.environ.get("KBUS_TEST_ARTIFACTS"):
        target = Path(os.environ["KBUS_TEST_ARTIFACTS"])
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target / path.name)


def _click(driver: WebDriver, css: str) -> None:
    """Click what ``css`` finds and wait until the page it submits has replaced this one."""
    page = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.CSS_SELECTOR, css).click()
    WebDriverWait(driver, 180).until(replaced(page))
    WebDriverWait(driver, 60).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )


def _status(driver: WebDriver) -> str:
    return " ".join(p.text for p in driver.find_elements(By.CSS_SELECTOR, "[role=status]"))


def _pdf(path: Path) -> None:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    pdf.multi_cell(0, 8, "The chiller plant restarts itself after a power cut within a minute.")
    pdf.output(str(path))


async def test_a_person_imports_searches_and_deletes_in_the_browser(
    locked: Locked, console: str, browser: WebDriver, tmp_path: Path
) -> None:
    kb = await client_for(locked, "t3-a")
    async with kb:
        await kb.publish_document(
            library="lib-a",
            document_id="hostile",
            title=HOSTILE,
            text=f"{HOSTILE} The quartermaster keeps the spare keys. {HOSTILE}",
            source_uri="javascript:window.kbusXss=3",
            metadata={"note": HOSTILE},
            wait=True,
            timeout_s=120,
        )
    token = CredentialFile.read(locked.auth / "credential-t3-a.json").token()
    guide, manual = tmp_path / "boiler-guide.md", tmp_path / "chiller.pdf"
    guide.write_text("# Boiler room\n\nThe boiler key hangs in the red box by the loading dock.\n")
    _pdf(manual)

    browser.get(console)
    browser.find_element(By.ID, "token").send_keys(token)
    _click(browser, "form[action='/sign-in'] button")
    assert "Libraries" in browser.title
    browser.find_element(By.ID, "library").send_keys("lib-a")
    _click(browser, "form[action='/open'] button")
    assert "Library lib-a" in browser.title

    browser.find_element(By.ID, "files").send_keys(f"{guide}\n{manual}")
    _click(browser, "form[enctype='multipart/form-data'] button")
    said = _status(browser)
    assert "boiler-guide.md: indexed" in said, said
    assert "chiller.pdf: indexed" in said, said
    _shot(browser, tmp_path, "imported")

    browser.find_element(By.ID, "q").send_keys("where is the boiler key")
    _click(browser, "form[role=search] button")
    first = browser.find_element(By.CSS_SELECTOR, "article.hit")
    assert "Boiler room" in first.text
    scores = first.find_element(By.CSS_SELECTOR, ".scores").text
    assert "final" in scores, scores
    assert "fused" in scores, scores
    assert first.find_elements(By.TAG_NAME, "mark"), "the query's words are not marked"
    _shot(browser, tmp_path, "search")

    browser.get(f"{console}/libraries/lib-a?q=quartermaster")
    hit = browser.find_element(By.CSS_SELECTOR, "article.hit")
    assert "<script>" in hit.text  # shown as text, not run
    assert browser.execute_script("return window.kbusXss === undefined")
    assert not browser.find_elements(By.CSS_SELECTOR, "a[href^='javascript']")

    _click(browser, "button[aria-label='Delete boiler-guide.md']")
    assert "deleted boiler-guide.md" in _status(browser), browser.page_source[:2000]
    assert not browser.find_elements(By.CSS_SELECTOR, "button[aria-label='Delete boiler-guide.md']")
    assert browser.execute_script("return window.kbusXss === undefined")

    # The signed-in cookie alone changes nothing: a form needs its CSRF token.
    cookies = {c["name"]: c["value"] for c in browser.get_cookies()}
    async with httpx.AsyncClient(cookies=cookies) as http:
        forged = await http.post(
            f"{console}/libraries/lib-a/documents/chiller.pdf/delete",
            data={"csrf": "guessed"},
            headers={"Origin": "https://evil.test"},
        )
    assert forged.status_code == 403
    browser.get(f"{console}/libraries/lib-a")
    assert browser.find_elements(By.CSS_SELECTOR, "button[aria-label='Delete chiller.pdf']")
    _shot(browser, tmp_path, "library")


async def test_a_person_changes_a_chunker_and_replays_a_dead_letter_in_the_browser(
    locked: Locked, console: str, browser: WebDriver, tmp_path: Path
) -> None:
    """The profile's preview follows the chunker; a dead letter replayed in one click leaves
    the list (its message fails again here, as a new letter)."""
    kb = await client_for(locked, "t3-a")
    async with kb:
        body: dict[str, Any] = {"tenant": "t3", "library": "lib-a", "title": "x", "text": "y"}
        body |= {"document_id": "console-letter", "content_type": "application/json"}
        body |= {"template": {"text": "{a}"}}
        await kb.nc.jetstream().publish(TOPOLOGY.added("t3", "lib-a"), json.dumps(body).encode())
    token = CredentialFile.read(locked.auth / "credential-t3-a.json").token()
    browser.delete_all_cookies()
    browser.get(console)
    browser.find_element(By.ID, "token").send_keys(token)
    _click(browser, "form[action='/sign-in'] button")

    sample = "# Pumps\n\n## Priming\nOpen the vent.\n\n## Draining\nClose the valve.\n"
    counts = []
    for chunker in ({"kind": "recursive"}, {"kind": "pattern", "pattern": "^## "}):
        browser.get(f"{console}/libraries/lib-a/profile")
        editor = browser.find_element(By.ID, "profile")
        editor.clear()
        editor.send_keys(json.dumps({"chunker": chunker}))
        browser.find_element(By.ID, "sample").clear()
        browser.find_element(By.ID, "sample").send_keys(sample)
        _click(browser, "form[action$='/profile'] button")
        said = _status(browser)
        assert "saved as revision" in said, browser.page_source[:3000]
        counts.append(int(said.split("cut into ")[1].split()[0]))
        shown = browser.find_elements(By.CSS_SELECTOR, "ol.preview li")
        assert len(shown) == counts[-1], browser.page_source[:3000]
    assert counts[1] > counts[0], counts
    _shot(browser, tmp_path, "profile")
    async with await client_for(locked, "t3-a") as kb:  # back to kbus's defaults
        await kb.profile("lib-a", set_to=LibraryProfile())

    for _ in range(60):
        browser.get(f"{console}/dead-letters")
        buttons = browser.find_elements(By.CSS_SELECTOR, "button[aria-label^='Replay dead letter']")
        rows = [b for b in buttons if "console-letter" in b.find_element(By.XPATH, "../../..").text]
        if rows:
            break
        await asyncio.sleep(0.5)
    label = rows[-1].get_attribute("aria-label")
    _click(browser, f"button[aria-label='{label}']")
    assert "replayed dead letter" in _status(browser), browser.page_source[:3000]
    assert not browser.find_elements(By.CSS_SELECTOR, f"button[aria-label='{label}']")
    _shot(browser, tmp_path, "dead-letters")
