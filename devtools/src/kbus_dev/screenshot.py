"""The README's picture of the web console: ``python -m kbus_dev screenshot`` signs in to the
console ``make demo`` runs (with a token made from the demo tenant's credential), searches the
demo library in Debian's chromium, headless, and saves what it shows as ``docs/console.png``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from urllib.parse import quote, urlencode

from kbus_client import CredentialFile

from kbus_dev.browser import headless_chromium, replaced
from kbus_dev.demo import LIBRARY
from kbus_dev.stack import CONSOLE_PORT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbus_dev screenshot", description=__doc__)
    parser.add_argument("--console", default=f"http://127.0.0.1:{CONSOLE_PORT}")
    parser.add_argument(
        "--credential", type=Path, default=Path(".kbus/data/auth/credential-demo.json")
    )
    parser.add_argument("--library", default=LIBRARY)
    parser.add_argument("--query", default="how do I install on Linux")
    parser.add_argument("--out", type=Path, default=Path("docs/console.png"))
    args = parser.parse_args(argv)
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = headless_chromium(1200, 900)
    try:
        driver.get(args.console)
        driver.find_element(By.ID, "token").send_keys(CredentialFile.read(args.credential).token())
        page = driver.find_element(By.TAG_NAME, "html")
        driver.find_element(By.CSS_SELECTOR, "form[action='/sign-in'] button").click()
        WebDriverWait(driver, 60).until(replaced(page))
        where = f"/libraries/{quote(args.library, safe='')}?{urlencode({'q': args.query})}"
        driver.get(args.console + where)
        WebDriverWait(driver, 60).until(
            lambda d: d.execute_script("return document.readyState") == "complete"
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(args.out))
    finally:
        driver.quit()
    print(f"wrote {args.out}")
    return 0
