"""The one progress bar: on stderr when enabled, silent otherwise."""

from attnlab.progress import progress_bar


def test_a_bar_shows_on_stderr_only_when_enabled(capsys):
    for enabled in (True, False):
        bar = progress_bar(3, unit="piece", enabled=enabled, desc="reading")
        bar.update(3)
        bar.close()
        captured = capsys.readouterr()
        assert captured.out == ""
        assert ("reading" in captured.err and "3/3" in captured.err and "piece" in captured.err) is enabled
