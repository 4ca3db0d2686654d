"""The explorer in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``, ``make browser``) driven by Selenium, against a real uvicorn server on a
loopback port, and the file ``attnlab export-html`` writes, opened from disk.

The browser may resolve no host name but the loopback one, so a page that reached for a CDN
would fail here. Screenshots are saved beside the test's temporary files (and into
``$ATTNLAB_SCREENSHOTS`` when it is set)."""

from __future__ import annotations

import html
import os
import shutil
from pathlib import Path

import httpx
import pytest

from browser import CHROMIUM, DRIVER, chromium
from explorer_toys import serving

pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER),
                                reason="needs Chromium and its driver: make browser")
webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium: pip install 'attnlab[test]'")

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

from attnlab.explorer.access import Access  # noqa: E402
from attnlab.explorer.export import export_views, write_page  # noqa: E402

GERMAN = "Zwei Männer spielen Fußball im Park."
WAIT_S = 60



@pytest.fixture(scope="module")
def browser():
    driver = chromium(logs=())
    yield driver
    driver.quit()


def screenshot(driver, directory: Path, name: str) -> Path:
    path = directory / name
    assert driver.save_screenshot(str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("ATTNLAB_SCREENSHOTS"):
        keep = Path(os.environ["ATTNLAB_SCREENSHOTS"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, keep / name)
    return path


def panel(driver, name: str):
    return driver.find_element(By.CSS_SELECTOR, f"[data-panel={name}]")


def wait_state(driver, name: str, state: str = "ready") -> None:
    WebDriverWait(driver, WAIT_S).until(
        lambda d: panel(d, name).get_attribute("data-state") in (state, "error"))
    status = panel(driver, name).find_element(By.CLASS_NAME, "status").text
    assert panel(driver, name).get_attribute("data-state") == state, status


def hover(driver, element) -> str:
    """Move the mouse onto ``element`` and read the tooltip."""
    ActionChains(driver).move_to_element(element).perform()
    tip = driver.find_element(By.CLASS_NAME, "attnlab-tip")
    WebDriverWait(driver, WAIT_S).until(lambda d: tip.is_displayed())
    return tip.text


def mean_last_layer(attention) -> list[list[float]]:
    """What the page draws first: the last layer, the mean over its heads."""
    heads = attention[-1]
    return [[sum(h[i][j] for h in heads) / len(heads) for j in range(len(heads[0][0]))]
            for i in range(len(heads[0]))]


def check_heatmap(driver, view) -> None:
    """Cells = target × source tokens; hovering one shows its weight, the page's mean of the
    last layer's heads, which is the API's to rounding."""
    cells = panel(driver, "translate").find_elements(By.CSS_SELECTOR, "td.cell")
    T, S = len(view["target_tokens"]), len(view["source_tokens"])
    assert len(cells) == T * S and T > 1 and S == 7
    rows = [e.text for e in panel(driver, "translate").find_elements(By.CSS_SELECTOR, "th.row-label")]
    assert rows == view["target_tokens"]
    cell = cells[(T // 2) * S + 2]
    i, j = int(cell.get_attribute("data-row")), int(cell.get_attribute("data-col"))
    text = hover(driver, cell)
    weight = float(text.rsplit(": ", 1)[1])
    assert text == f"{view['target_tokens'][i]} ← {view['source_tokens'][j]}: {weight:.4f}"
    assert weight == pytest.approx(mean_last_layer(view["attention"])[i][j], abs=1e-4)
    assert cell.get_attribute("data-weight") == f"{weight:.4f}"


def test_the_served_page(browser, models, tmp_path):
    with serving(models) as base:
        browser.get(base + "/")
        root = browser.find_element(By.CLASS_NAME, "attnlab-explorer")
        WebDriverWait(browser, WAIT_S).until(lambda d: root.get_attribute("data-models") == "loaded")
        # Translation: type, pick beam 2, submit, wait for the heatmap.
        text = panel(browser, "translate").find_element(By.NAME, "text")
        text.clear()
        text.send_keys(GERMAN)
        Select(panel(browser, "translate").find_element(By.NAME, "beam")).select_by_value("2")
        panel(browser, "translate").find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_state(browser, "translate")
        view = httpx.post(base + "/api/translate", json={"text": GERMAN, "beam": 2}).json()
        shown = panel(browser, "translate").find_element(By.CLASS_NAME, "translation").text
        assert shown == view["translation"]
        check_heatmap(browser, view)
        screenshot(browser, tmp_path, "explorer_translate.png")

        # An empty sentence: the API's 422 message on the page.
        text.clear()
        panel(browser, "translate").find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_state(browser, "translate", "error")
        status = panel(browser, "translate").find_element(By.CLASS_NAME, "status").text
        assert status == "text must not be empty"

        # GPT: stream 20 tokens, click the last, its context lights up with the weights.
        browser.find_element(By.CSS_SELECTOR, "[data-tab=generate]").click()
        form = panel(browser, "generate")
        for name, value in [("prompt", "To be"), ("max_new_tokens", "20"), ("seed", "4")]:
            field = form.find_element(By.NAME, name)
            field.clear()
            field.send_keys(value)
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_state(browser, "generate")
        generated = form.find_elements(By.CSS_SELECTOR, ".tok.gen")
        assert len(generated) == 20 and len(form.find_elements(By.CSS_SELECTOR, ".tok.prompt")) == 5
        shown_text = [t.text for t in generated]
        generated[-1].click()
        assert [t.text for t in generated] == shown_text and "chosen" in generated[-1].get_attribute("class")
        note = form.find_element(By.CLASS_NAME, "chosen-note").text
        assert note.startswith(f"“{shown_text[-1]}” (position 24) was drawn by a query over positions ")
        lit = form.find_elements(By.CSS_SELECTOR, ".tok[data-weight]")
        assert 1 <= len(lit) <= 16  # the window of block_size 16 that drew it
        weights = [float(t.get_attribute("data-weight")) for t in lit]
        assert sum(weights) == pytest.approx(1.0, abs=5e-3)
        assert hover(browser, lit[0]).endswith(f": {weights[0]:.4f}")
        screenshot(browser, tmp_path, "explorer_generate.png")

        # Head view: n × n cells and a line per visible weight.
        browser.find_element(By.CSS_SELECTOR, "[data-tab=heads]").click()
        panel(browser, "heads").find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_state(browser, "heads")
        sentence = panel(browser, "heads").find_element(By.NAME, "text").get_attribute("value")
        n = len(httpx.post(base + "/api/heads", json={"text": sentence}).json()["tokens"])
        assert len(panel(browser, "heads").find_elements(By.CSS_SELECTOR, "svg.lines text.query")) == n
        assert len(panel(browser, "heads").find_elements(By.CSS_SELECTOR, "td.cell")) == n * n
        assert panel(browser, "heads").find_elements(By.CSS_SELECTOR, "svg.lines line")
        screenshot(browser, tmp_path, "explorer_heads.png")
        fetched = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        assert fetched and all(url.startswith(base + "/") for url in fetched)


def test_the_page_carries_the_token_of_its_address(browser, models):
    """A server with a token: the page opened without it says what is missing; opened from the
    address ``attnlab serve`` prints, it keeps the token, drops it from the address bar and
    sends it with every API request."""
    token = "token-of-the-browser-test"
    with serving(models, access=Access(token=token)) as base:
        browser.get(base + "/")
        root = browser.find_element(By.CLASS_NAME, "attnlab-explorer")
        WebDriverWait(browser, WAIT_S).until(lambda d: root.get_attribute("data-models") == "error")
        assert panel(browser, "translate").find_element(By.CLASS_NAME, "status").text.startswith(
            "this explorer's API needs its token")
        browser.get(f"{base}/?token={token}")
        root = browser.find_element(By.CLASS_NAME, "attnlab-explorer")
        WebDriverWait(browser, WAIT_S).until(lambda d: root.get_attribute("data-models") == "loaded")
        assert browser.current_url == base + "/"
        panel(browser, "translate").find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_state(browser, "translate")
        browser.refresh()  # the tab still holds it
        root = browser.find_element(By.CLASS_NAME, "attnlab-explorer")
        WebDriverWait(browser, WAIT_S).until(lambda d: root.get_attribute("data-models") == "loaded")


def test_the_exported_file_opens_from_disk(browser, models, tmp_path):
    data = export_views(models, source=GERMAN, beam=2, prompt="To be", max_new_tokens=12, seed=1)
    path = write_page(tmp_path / "explorer.html", data)
    browser.get(path.as_uri())
    wait_state(browser, "translate")
    check_heatmap(browser, data["translate"]["view"])
    screenshot(browser, tmp_path, "explorer_export.png")
    browser.find_element(By.CSS_SELECTOR, "[data-tab=generate]").click()
    assert len(panel(browser, "generate").find_elements(By.CSS_SELECTOR, ".tok.gen")) == 12
    browser.find_element(By.CSS_SELECTOR, "[data-tab=heads]").click()
    n = len(data["heads"]["view"]["tokens"])
    assert len(panel(browser, "heads").find_elements(By.CSS_SELECTOR, "td.cell")) == n * n
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert browser.find_element(By.CLASS_NAME, "mode-note").text.startswith("Written by attnlab export-html")

    # In a notebook cell: the same file as the srcdoc of a frame (what export.py's docstring shows).
    page = path.read_text(encoding="utf-8")
    host = tmp_path / "notebook_cell.html"
    host.write_text(f'<p>a cell</p><iframe srcdoc="{html.escape(page)}" width="1200" height="900"></iframe>',
                    encoding="utf-8")
    browser.get(host.as_uri())
    browser.switch_to.frame(browser.find_element(By.TAG_NAME, "iframe"))
    try:
        wait_state(browser, "translate")
        check_heatmap(browser, data["translate"]["view"])
    finally:
        browser.switch_to.default_content()


READ = "To be, or not"  # 13 characters, 13 tokens of the toy GPT (block 16)


def click_at(driver, element, x: float, y: float) -> None:
    """Click ``element`` at (x, y) CSS pixels from its top-left corner."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    ActionChains(driver).move_to_element_with_offset(
        element, x - element.size["width"] / 2, y - element.size["height"] / 2).click().perform()


def switch_head(driver, box, layer: int, head: int) -> None:
    """Click the thumbnail of ``layer``'s ``head`` and wait until it is drawn in full."""
    grid = box.find_element(By.CLASS_NAME, "attnlab-attention-grid")
    step = float(grid.get_attribute("data-step"))
    click_at(driver, grid, float(grid.get_attribute("data-left")) + (head + 0.5) * step,
             float(grid.get_attribute("data-top")) + (layer + 0.5) * step)
    WebDriverWait(driver, WAIT_S).until(lambda d: box.get_attribute("data-drawn") == f"{layer},{head}")


def check_cell(driver, box, tokens, weights, i: int, j: int) -> None:
    """Hover cell (i, j) of the drawn head: the tooltip names both tokens and the weight, the
    float weight within half a quantization step (row i's largest / 510)."""
    canvas = box.find_element(By.CLASS_NAME, "attnlab-attention-map")
    margin, cell = float(canvas.get_attribute("data-margin")), float(canvas.get_attribute("data-cell"))
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)
    ActionChains(driver).move_to_element_with_offset(
        canvas, margin + (j + 0.5) * cell - canvas.size["width"] / 2,
        margin + (i + 0.5) * cell - canvas.size["height"] / 2).perform()
    tip = box.find_element(By.CLASS_NAME, "attnlab-attention-tip")
    WebDriverWait(driver, WAIT_S).until(lambda d: tip.is_displayed() and f"({i + 1}) →" in tip.text)
    label, weight = tip.text.rsplit(": ", 1)
    assert label == f"{tokens[i]} ({i + 1}) → {tokens[j]} ({j + 1})"
    if j > i:
        assert weight == "masked"
    else:
        assert float(weight) == pytest.approx(float(weights[i, j]), abs=float(weights[i].max()) / 510 + 1e-4)


def test_the_attention_map_draws_a_head_and_switches(browser, models, tmp_path):
    exact = models.get("gpt").pipeline.attention(READ)
    with serving(models) as base:
        browser.get(base + "/")
        root = browser.find_element(By.CLASS_NAME, "attnlab-explorer")
        WebDriverWait(browser, WAIT_S).until(lambda d: root.get_attribute("data-models") == "loaded")
        browser.find_element(By.CSS_SELECTOR, "[data-tab=attention]").click()
        text = panel(browser, "attention").find_element(By.NAME, "text")
        text.clear()
        text.send_keys(READ)
        panel(browser, "attention").find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_state(browser, "attention")
        box = panel(browser, "attention").find_element(By.CLASS_NAME, "attention-map")
        assert box.get_attribute("data-n") == "13"
        assert box.get_attribute("data-drawn") == "1,0"  # the last layer's first head
        check_cell(browser, box, exact.tokens, exact.weights[1, 0], 12, 3)
        switch_head(browser, box, 0, 1)
        pickers = [Select(s) for s in box.find_elements(By.TAG_NAME, "select")]
        layer, head = (picker.first_selected_option.text for picker in pickers[:2])
        assert (layer, head) == ("1", "2")  # the pickers follow, counted from 1
        check_cell(browser, box, exact.tokens, exact.weights[0, 1], 7, 7)
        check_cell(browser, box, exact.tokens, exact.weights[0, 1], 2, 9)
        pickers[0].select_by_visible_text("2")  # a picker switches too
        WebDriverWait(browser, WAIT_S).until(lambda d: box.get_attribute("data-drawn") == "1,1")
        check_cell(browser, box, exact.tokens, exact.weights[1, 1], 5, 0)
        screenshot(browser, tmp_path, "explorer_attention.png")
        fetched = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        records = [url for url in fetched if "/api/attention/" in url]
        assert len(records) == 3 and all(url.startswith(base + "/") for url in fetched)  # one fetch a head


def test_the_exported_attention_map_inflates_its_heads_offline(browser, models, tmp_path):
    data = export_views(models, prompt="To be", max_new_tokens=2, seed=1, text=READ)
    exact = models.get("gpt").pipeline.attention(READ)
    browser.get(write_page(tmp_path / "explorer.html", data).as_uri())
    browser.find_element(By.CSS_SELECTOR, "[data-tab=attention]").click()
    wait_state(browser, "attention")
    box = panel(browser, "attention").find_element(By.CLASS_NAME, "attention-map")
    switch_head(browser, box, 0, 0)
    check_cell(browser, box, exact.tokens, exact.weights[0, 0], 10, 4)
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
