"""The one progress bar: on stderr when enabled, silent otherwise."""

import re
from pathlib import Path

import tqdm

import attnlab.progress as progress_module
from attnlab.progress import progress, progress_bar


def test_a_bar_shows_on_stderr_only_when_enabled(capsys):
    for enabled in (True, False):
        bar = progress_bar(3, unit="piece", enabled=enabled, desc="reading")
        bar.update(3)
        bar.close()
        captured = capsys.readouterr()
        assert captured.out == ""
        assert ("reading" in captured.err and "3/3" in captured.err and "piece" in captured.err) is enabled


def test_progress_yields_every_item_and_counts_them(capsys):
    assert list(progress(iter("abc"), desc="letters", enabled=True)) == ["a", "b", "c"]
    assert "3/3" in capsys.readouterr().err
    assert list(progress(range(4), desc="quiet", enabled=False)) == [0, 1, 2, 3]
    assert capsys.readouterr().err == ""


def test_without_ipywidgets_the_text_bar_is_used(monkeypatch):
    """tqdm.auto's notebook bar warns "IProgress not found" without ipywidgets: the text bar then."""
    monkeypatch.setattr(progress_module, "find_spec", lambda name: None)
    assert progress_module._tqdm_class() is tqdm.tqdm
    monkeypatch.setattr(progress_module, "find_spec", lambda name: object())
    from tqdm.auto import tqdm as auto

    assert progress_module._tqdm_class() is auto


def test_only_the_progress_module_imports_tqdm():
    """One progress bar: every other module goes through attnlab.progress."""
    src = Path(progress_module.__file__).parent
    users = [p.relative_to(src).as_posix() for p in src.rglob("*.py")
             if re.search(r"^\s*(from tqdm|import tqdm)", p.read_text(encoding="utf-8"), re.M)]
    assert users == ["progress.py"]
