"""The web console in a real browser: Debian's chromium, headless, driven through its
chromedriver (``python -m kbus_dev install --test-tools`` installs both). A person signs in with
a token, imports a Markdown file and a PDF and sees them indexed, searches and reads every
score, deletes a document; a document whose title, text, address and metadata are script runs
nothing; a form without its CSRF token changes nothing. Screenshots are kept beside the test's
temporary files (and in ``KBUS_TEST_ARTIFACTS`` when set)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fpdf import FPDF
from kbus_client import CredentialFile
from kbus_dev.browser import CHROMEDRIVER, CHROMIUM
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.security.conftest import Locked, client_for

#: Script in every field a page shows: each sets ``window.kbusXss`` if it runs.
HOSTILE = '<script>window.kbusXss=1</script><img src=x onerror="window.kbusXss=2">'


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_window_size(1280, 1000)
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
    browser.find_element(By.CSS_SELECTOR, "form[action='/sign-in'] button").click()
    assert "Libraries" in browser.title
    browser.find_element(By.ID, "library").send_keys("lib-a")
    browser.find_element(By.CSS_SELECTOR, "form[action='/open'] button").click()
    assert "Library lib-a" in browser.title

    browser.find_element(By.ID, "files").send_keys(f"{guide}\n{manual}")
    browser.find_element(By.CSS_SELECTOR, "form[enctype='multipart/form-data'] button").click()
    said = _status(browser)
    assert "boiler-guide.md: indexed" in said, said
    assert "chiller.pdf: indexed" in said, said
    _shot(browser, tmp_path, "imported")

    browser.find_element(By.ID, "q").send_keys("where is the boiler key")
    browser.find_element(By.CSS_SELECTOR, "form[role=search] button").click()
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

    browser.find_element(By.CSS_SELECTOR, "button[aria-label='Delete boiler-guide.md']").click()
    assert "deleted boiler-guide.md" in _status(browser)
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
