"""The five decks as notebooks (docs/notebooks/), as stored in git: one a deck, titled by it,
quick mode read in the first cell, equations in Unicode, and no outputs.

The notebooks are kept without outputs: an executed one carries every view's data and script and
a matplotlib PNG beside it (hundreds of kB each, several MB a notebook), which would bloat the
repository, make every re-run a large diff and go stale as the code changes. ``make notebooks``
(benchmarks/notebooks.py) executes them into runs/notebooks/ and exports each to HTML;
tests/test_notebooks_browser.py opens those pages in Chromium.
"""

from __future__ import annotations

import json
import re

import pytest

from repo_paths import ROOT

NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.ipynb"))
DECKS = {  # title, as docs/lectures.md lists it → an author the first cell names
    "Transformer (Part I)": "Xiao Li",
    "Transformers, I": "Shane Steinert-Threlkeld",
    "Attention Mechanisms and Transformer Architecture": "Sebastián López",
    "Lecture 21: Transformer": "Mark Hasegawa-Johnson",
    "CSC413/2516 Lecture 8: Attention and Transformers": "Jimmy Ba",
}


CLEAR = "clear them: .venv/bin/jupyter nbconvert --clear-output --inplace docs/notebooks/*.ipynb"


def cells(path):
    notebook = json.loads(path.read_text(encoding="utf-8"))
    assert notebook["nbformat"] == 4, f"{path.name} is not an nbformat 4 notebook"
    return notebook["cells"]


def source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def test_one_notebook_a_deck_titled_by_it():
    lectures = (ROOT / "docs" / "lectures.md").read_text(encoding="utf-8")
    titles = {}
    for path in NOTEBOOKS:
        first = cells(path)[0]
        assert first["cell_type"] == "markdown", f"{path.name} must open with its deck's title"
        heading = source(first).splitlines()[0]
        assert heading.startswith("# "), f"{path.name}: first line {heading!r} is not a title"
        titles[heading[2:]] = path.name
        assert DECKS.get(heading[2:], "?") in source(first), f"{path.name} does not name its deck's author"
    assert sorted(titles) == sorted(DECKS), f"the notebooks' titles {sorted(titles)} are not the five decks"
    for title in DECKS:
        assert f"*{title}*" in lectures, f"docs/lectures.md does not list the deck {title!r}"
        assert f"notebooks/{titles[title]}" in lectures, f"docs/lectures.md does not link {titles[title]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_without_outputs(path):
    for number, cell in enumerate(cells(path), start=1):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [], f"{path.name}, cell {number}: stored with outputs; {CLEAR}"
            assert cell["execution_count"] is None, f"{path.name}, cell {number}: stored with a count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_first_code_cell_reads_quick_mode(path):
    code = [source(c) for c in cells(path) if c["cell_type"] == "code"]
    assert 'os.environ.get("ATTNLAB_QUICK"' in code[0], f"{path.name}: cell 1 must read ATTNLAB_QUICK"
    assert "from attnlab import views" in code[0], f"{path.name}: the first code cell must import the views"


TEX = re.compile(r"\$[^$\n]+\$|\\(?:frac|sum|mathbf|sqrt)\b")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_equations_are_unicode_not_tex(path):
    """The offline HTML export loads no MathJax, so TeX in Markdown would show as its source."""
    for number, cell in enumerate(cells(path), start=1):
        if cell["cell_type"] == "markdown":
            found = TEX.search(source(cell))
            assert found is None, f"{path.name}, cell {number}: TeX {found.group(0)!r}; write it in Unicode"


def test_make_notebooks_and_ci_run_them():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^notebooks: install\n(\t.*\n)*\t.*benchmarks/notebooks\.py", makefile, re.M)
    assert "make notebooks" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "## Notebooks" in (ROOT / "README.md").read_text(encoding="utf-8")
