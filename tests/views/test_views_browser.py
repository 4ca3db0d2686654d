"""Ten views in one notebook, in a real browser: the notebook is built with nbformat, run by a
Jupyter kernel (nbclient; IPython calls each view's ``_repr_html_`` and ``_repr_png_``), exported
with nbconvert's ``lab`` page twice — as ``jupyter nbconvert --to html`` writes it, and as
:func:`attnlab.views.export_html` writes it — and each page opened from disk in headless
Chromium (Debian's ``chromium`` and ``chromium-driver``, ``make browser``) that may resolve no
host name. All ten views must draw (their ``data-drawn``), a head switch, the head view's hover
and the downloads must work, and the browser's log of requests (the DevTools ``Network`` events,
failed ones included) must hold no request of the views': on nbconvert's own page only its two
CDN scripts (require.js, MathJax), on the offline page none at all."""

from __future__ import annotations

import pytest

from browser import CHROMIUM, DRIVER, chromium, requested_urls
from repo_paths import ROOT

pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER),
                                reason="needs Chromium and its driver: make browser")
webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium: pip install 'attnlab[test]'")
for _package in ("nbformat", "nbclient", "nbconvert", "ipykernel"):
    pytest.importorskip(_package, reason=f"needs {_package} (Jupyter's): make notebooks")

import nbformat  # noqa: E402
import torch  # noqa: E402
from nbclient import NotebookClient  # noqa: E402
from nbconvert import HTMLExporter  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

from attnlab import views  # noqa: E402

WAIT_S = 60
SETUP = f"""import sys
sys.path.insert(0, {str(ROOT / "src")!r})
import torch
from attnlab import views
g = torch.Generator().manual_seed(0)
def causal(layers, heads, n):
    scores = torch.randn(layers, heads, n, n, generator=g) * 3
    return scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
words = "the cat sat on the mat because it was tired".split()
"""
CELLS = [
    "views.heatmap(causal(2, 3, 10), words, title='causal self-attention')",
    "views.heatmap(torch.rand(2, 2, 4, 6, generator=g).softmax(-1), list('abcdef'), list('WXYZ'), "
    "title='cross')",
    "views.alignment(torch.rand(5, 7, generator=g).softmax(-1), list('abcdefg'), list('VWXYZ'), "
    "title='alignment')",
    "views.model_view(words, causal(3, 4, 10), title='model view')",
    "views.head_view(words, causal(2, 3, 10), title='head view')",
    "views.neuron_view(words, torch.randn(2, 3, 10, 16, generator=g), "
    "torch.randn(2, 3, 10, 16, generator=g), 1, 2, causal=True, title='neuron view')",
    "maps = torch.rand(4, 4, 4, generator=g)\n"
    "views.caption_attention(torch.rand(1, 16, 16, generator=g), ['a', 'big', 'seven', '<eos>'], maps, "
    "title='caption')",
    "views.ntm_memory(torch.rand(12, 16, generator=g).softmax(-1), "
    "torch.rand(12, 16, generator=g).softmax(-1), adds=torch.rand(12, 6, generator=g) * 2 - 1, "
    "title='NTM memory')",
    "views.heatmap(causal(1, 2, 60), [f't{i}' for i in range(60)], title='60 tokens')",
    "views.head_view(list('ABCDEF'), torch.rand(1, 2, 6, 6, generator=g).softmax(-1), "
    "title='second head view')",
]


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    """The ten views' notebook, run by a kernel; its path."""
    directory = tmp_path_factory.mktemp("notebook")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Ten attnlab views"), nbformat.v4.new_code_cell(SETUP)]
    nb.cells += [nbformat.v4.new_code_cell(source) for source in CELLS]
    resources = {"metadata": {"path": str(directory)}}
    NotebookClient(nb, timeout=120, kernel_name="python3", resources=resources).execute()
    path = directory / "ten_views.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def browser():
    driver = chromium()
    yield driver
    driver.quit()


def external(urls: list[str]) -> list[str]:
    return [url for url in urls if not url.startswith(("file:", "data:", "blob:"))]


def open_and_wait(driver, path) -> list:
    requested_urls(driver)  # the log so far, dropped
    driver.get(path.as_uri())
    roots = driver.find_elements(By.CLASS_NAME, "attnlab-view")
    WebDriverWait(driver, WAIT_S).until(
        lambda d: all(r.get_attribute("data-drawn") or r.get_attribute("data-error") for r in roots))
    return roots


def test_each_cell_holds_its_view_as_html_and_png(notebook):
    nb = nbformat.read(notebook, as_version=4)
    outputs = [cell.outputs for cell in nb.cells[2:]]
    assert len(outputs) == 10
    for cell_outputs in outputs:
        (result,) = [o for o in cell_outputs if o.output_type == "execute_result"]
        assert {"text/html", "image/png", "text/plain"} <= set(result.data)
        assert result.data["text/plain"].startswith("<attnlab view")


@pytest.mark.parametrize("offline", [False, True], ids=["nbconvert-to-html", "views.export_html"])
def test_ten_views_draw_in_the_exported_page_with_no_network(notebook, browser, tmp_path, offline):
    path = tmp_path / "ten_views.html"
    if offline:
        views.export_html(notebook, path)
    else:  # what `jupyter nbconvert --to html` writes
        body, _ = HTMLExporter(template_name="lab").from_notebook_node(nbformat.read(notebook, as_version=4))
        path.write_text(body, encoding="utf-8")
    roots = open_and_wait(browser, path)
    assert len(roots) == 10
    assert [r.get_attribute("data-error") for r in roots] == [None] * 10
    drawn = [r.get_attribute("data-drawn") for r in roots]
    assert drawn[:3] == ["1,3", "1,2", "0,0"]  # the last layer's mean head (3 heads, 2 heads), an RNN's one
    assert drawn[4:8] == ["1:0,1,2", "query 9", "words 4", "steps 12"]
    assert len({r.get_attribute("id") for r in roots}) == 10
    urls = requested_urls(browser)
    template = HTMLExporter(template_name="lab")
    if offline:
        assert external(urls) == []
    else:  # nbconvert's page asks for its CDN scripts (and fails, offline); the views ask nothing
        assert set(external(urls)) == {template.require_js_url, template.mathjax_url}


def test_the_views_respond_in_the_offline_page(notebook, browser, tmp_path):
    path = views.export_html(notebook, tmp_path / "ten_views.html")
    roots = open_and_wait(browser, path)
    heatmap, head_view = roots[0], roots[4]
    Select(heatmap.find_element(By.CSS_SELECTOR, "select")).select_by_index(0)  # layer 1, its mean
    WebDriverWait(browser, WAIT_S).until(lambda d: heatmap.get_attribute("data-drawn") == "0,3")
    head_view.find_elements(By.CSS_SELECTOR, "span[data-head]")[1].click()  # head 2 hidden
    WebDriverWait(browser, WAIT_S).until(lambda d: head_view.get_attribute("data-drawn") == "1:0,2")
    for root in roots:
        svg = browser.execute_script("return arguments[0].attnlabView.svg()", root)
        assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg"') and svg.endswith("</svg>")
        size = browser.execute_async_script(
            "var done = arguments[1]; arguments[0].attnlabView.png().then(b => done([b.type, b.size]))", root)
        assert size[0] == "image/png" and size[1] > 1000
        assert len(root.find_elements(By.CSS_SELECTOR, ".attnlab-view-png, .attnlab-view-svg")) == 2
    assert external(requested_urls(browser)) == []


def test_one_output_shown_twice_draws_twice(browser, tmp_path):
    """JupyterLab's "new view for output" puts the same HTML, the same id, twice on a page: each
    copy mounts on the element around its own script."""
    from attnlab.views.html import page

    fragment = views.heatmap(torch.rand(2, 5, 5).softmax(-1), list("abcde"))._repr_html_()
    path = tmp_path / "twice.html"
    path.write_text(page(fragment + fragment, "twice"), encoding="utf-8")
    roots = open_and_wait(browser, path)
    assert len(roots) == 2 and [r.get_attribute("data-drawn") for r in roots] == ["0,2", "0,2"]
    assert len(browser.find_elements(By.CSS_SELECTOR, ".attnlab-view canvas.attnlab-attention-map")) == 2
