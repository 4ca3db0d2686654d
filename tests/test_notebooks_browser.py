"""The decks' notebooks as a reader opens them: each page ``make notebooks`` exported
(runs/notebooks/NAME.html, the notebook executed in quick mode) in headless Chromium with the
network disabled (the browser resolves no host name, and is offline).

For every page: no request leaves the file (every URL the page asks for is ``file:``, ``data:``,
``blob:`` or ``about:``), and every view the executed notebook holds (its outputs' roots
``class="attnlab-view"``) is drawn — its script set ``data-drawn`` — with none failing
(``data-error``). Skips, naming the command, without Chromium (``make browser``), without the
notebooks extra, or without pages newer than their notebooks (``make notebooks``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from browser import CHROMIUM, DRIVER, chromium, requested_urls
from repo_paths import ROOT

pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER),
                                reason="needs Chromium and its driver: make browser")
webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium: pip install 'attnlab[test]'")
pytest.importorskip("nbclient", reason="needs the notebooks extra: make notebooks")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.ipynb"))
EXPORTED = ROOT / "runs" / "notebooks"  # where make notebooks writes
VIEW_ROOT = 'class="attnlab-view"'
LOCAL = ("file:", "data:", "blob:", "about:")
WAIT_S = 120


def exported(notebook: Path) -> tuple[Path, Path]:
    """The executed notebook and its HTML page, skipping when make notebooks has not made them
    since ``notebook`` last changed."""
    executed, page = EXPORTED / notebook.name, EXPORTED / f"{notebook.stem}.html"
    if not page.is_file() or not executed.is_file():
        pytest.skip(f"no {page.relative_to(ROOT)}: make notebooks")
    if page.stat().st_mtime < notebook.stat().st_mtime:
        pytest.skip(f"{page.relative_to(ROOT)} is older than {notebook.name}: make notebooks")
    return executed, page


def views_in(executed: Path) -> int:
    """The views' root elements in the executed notebook's HTML outputs."""
    notebook = json.loads(executed.read_text(encoding="utf-8"))
    outputs = [out for cell in notebook["cells"] if cell["cell_type"] == "code" for out in cell["outputs"]]
    return sum(str(out.get("data", {}).get("text/html", "")).count(VIEW_ROOT) for out in outputs)


@pytest.fixture(scope="module")
def browser():
    driver = chromium(offline=True, logs=("performance", "browser"))
    yield driver
    driver.quit()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_view_draws_offline(browser, notebook):
    executed, page = exported(notebook)
    expected = views_in(executed)
    assert expected > 0, f"{executed.name} holds no view: was it executed with attnlab.views?"
    requested_urls(browser)  # drop what the previous page left in the log
    browser.get(page.as_uri())
    roots = browser.find_elements(By.CSS_SELECTOR, "div.attnlab-view")
    assert len(roots) == expected, f"{page.name}: {len(roots)} views on the page, {expected} in its notebook"

    def settled(_driver) -> bool:
        return all(r.get_attribute("data-drawn") is not None or r.get_attribute("data-error") is not None
                   for r in roots)

    for root in roots:  # scrolled into sight one by one, as a reader would
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", root)
    WebDriverWait(browser, WAIT_S).until(settled)
    errors = [(r.get_attribute("data-view"), r.get_attribute("data-error")) for r in roots
              if r.get_attribute("data-error") is not None]
    assert not errors, f"{page.name}: views that failed to draw: {errors}"
    drawn = sum(r.get_attribute("data-drawn") is not None for r in roots)
    assert drawn == expected, f"{page.name}: {drawn} of {expected} views drawn"
    outside = [u for u in requested_urls(browser) if not u.startswith(LOCAL)]
    assert outside == [], f"{page.name} asked the network for {outside}"
    if os.environ.get("ATTNLAB_SCREENSHOTS"):
        keep = Path(os.environ["ATTNLAB_SCREENSHOTS"])
        keep.mkdir(parents=True, exist_ok=True)
        browser.execute_script("window.scrollTo(0, 0)")
        assert browser.save_screenshot(str(keep / f"notebook_{notebook.stem}.png"))
