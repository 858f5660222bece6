"""A real browser for the web console's tests: Debian's ``chromium`` and its ``chromedriver``,
installed with apt (as root) by ``python -m kbus_dev install --test-tools``."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

PACKAGES = ("chromium", "chromium-driver")
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def ensure_browser() -> str:
    """The browser's path, installing it with apt where it is missing.

    Raises:
        SystemExit: it is missing and this process cannot install packages (not root).
    """
    if shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER):
        return CHROMIUM
    if os.geteuid() != 0:
        raise SystemExit(
            "the web console's tests need Debian's chromium and chromium-driver: "
            f"sudo apt-get install -y {' '.join(PACKAGES)}"
        )
    print("installing chromium and chromedriver with apt (first time only)", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]
    if subprocess.run(install, env=env, check=False).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, check=True)
        subprocess.run(install, env=env, check=True)
    return CHROMIUM


def headless_chromium(width: int, height: int) -> Any:
    """A selenium driver of Debian's chromium, headless, its window ``width`` by ``height``
    (the console's browser tests and its README picture)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_window_size(width, height)
    return driver


def replaced(page: Any) -> Any:
    """A wait's condition: ``page`` (an element of the page before a click) has left the
    document. chromium 156's driver sometimes says so as an unknown error ("does not belong to
    the document") rather than a stale element, which selenium's ``staleness_of`` lets through."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    def gone(_: Any) -> bool:
        try:
            page.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as exc:
            if "does not belong to the document" in str(exc.msg):
                return True
            raise
        return False

    return gone
