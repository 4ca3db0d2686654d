"""The five decks as notebooks (docs/notebooks/): run each top to bottom, export it to HTML, time it.

    make notebooks                                              # all five, quick mode, into runs/notebooks/
    .venv/bin/python benchmarks/notebooks.py                    # the same, once the extra is installed
    ATTNLAB_QUICK=0 .venv/bin/python benchmarks/notebooks.py    # full size
    .venv/bin/python benchmarks/notebooks.py ba_csc413_lecture8 # one notebook

Each notebook runs in a fresh Jupyter kernel (nbclient; ``--kernel``, default the project's
``attnlab`` kernel that ``make notebooks`` registers inside the virtual environment, else this
Python's own ``python3``) with the repository root as its working directory and this process's
environment: ``ATTNLAB_QUICK`` (``1`` unless set: the notebooks read it in their first cell and
shrink sizes and training steps), ``ATTNLAB_DATA`` (the corpora). The executed notebook, outputs
kept, and its static HTML export (:func:`attnlab.views.export_html`: nbconvert's ``lab`` page, the
views' scripts inline, without the require.js, MathJax and mermaid it would fetch from a CDN, so the
page makes no request; the notebooks write their equations in Unicode, not TeX) go to ``--out``; the
notebooks in git stay without outputs (tests/test_notebooks.py).

Prints the machine, then a line a notebook: its wall time from kernel start to the last cell, its
code cells, and the views it drew (outputs carrying an ``attnlab.views`` root); exits 1 after
naming each notebook whose cell raised (its partial HTML is still written, the error in it).
No assertion on time: the README reports the figures.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attnlab.atomic import write_atomic  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "docs" / "notebooks"
VIEW_ROOT = 'class="attnlab-view"'  # the root element of every attnlab.views view
CELL_TIMEOUT_S = 1800
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the colours of IPython's tracebacks


def notebook_paths(names: list[str]) -> list[Path]:
    """``docs/notebooks/NAME.ipynb`` for each name (every notebook when none is given)."""
    everything = sorted(NOTEBOOKS.glob("*.ipynb"))
    if not names:
        return everything
    by_name = {p.stem: p for p in everything}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"no notebook {unknown[0]!r} in {NOTEBOOKS}; there are {sorted(by_name)}")
    return [by_name[n] for n in names]


def kernel_name(wanted: str) -> str:
    """``wanted`` when Jupyter knows that kernel, else ``python3`` (this Python's own kernel)."""
    from jupyter_client.kernelspec import KernelSpecManager

    if wanted in KernelSpecManager().find_kernel_specs():
        return wanted
    print(f"no Jupyter kernel {wanted!r} (make notebooks registers it): running on python3, {sys.executable}")
    return "python3"


def views_drawn(nb) -> int:
    """The views' root elements in the executed notebook's HTML outputs."""
    return sum(str(out.get("data", {}).get("text/html", "")).count(VIEW_ROOT)
               for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", []))


def run_one(path: Path, kernel: str, out_dir: Path) -> tuple[float, int, int, str | None]:
    """Execute ``path``; write its executed copy and HTML into ``out_dir``. Returns (wall seconds,
    code cells, views drawn, the error or None)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from attnlab.views import export_html

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, kernel_name=kernel, timeout=CELL_TIMEOUT_S,
                            resources={"metadata": {"path": str(ROOT)}})
    error = None
    start = time.perf_counter()
    try:
        client.execute()
    except CellExecutionError as err:
        error = ANSI.sub("", str(err)).strip().splitlines()[-1]
    seconds = time.perf_counter() - start
    executed = write_atomic(out_dir / path.name, nbformat.writes(nb))
    export_html(executed, out_dir / f"{path.stem}.html")  # nbconvert's lab page, no CDN script
    cells = sum(cell.cell_type == "code" for cell in nb.cells)
    return seconds, cells, views_drawn(nb), error


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="notebooks to run (file names without .ipynb); default all")
    parser.add_argument("--kernel", default="attnlab", help="Jupyter kernel (default: attnlab, else python3)")
    parser.add_argument("--out", default=str(ROOT / "runs" / "notebooks"), help="executed notebooks and HTML")
    args = parser.parse_args(argv)
    print(_machine.header())
    os.environ.setdefault("ATTNLAB_QUICK", "1")
    os.environ.setdefault("ATTNLAB_DATA", str(ROOT.parent / "shared" / "data"))
    paths, kernel, out_dir = notebook_paths(args.names), kernel_name(args.kernel), Path(args.out)
    load = os.getloadavg()
    print(f"kernel {kernel}; ATTNLAB_QUICK={os.environ['ATTNLAB_QUICK']}; load average {load[0]:.2f} "
          f"{load[1]:.2f} {load[2]:.2f}; {len(paths)} notebooks into {out_dir}")
    failed, total = [], 0.0
    for path in paths:
        seconds, cells, drawn, error = run_one(path, kernel, out_dir)
        total += seconds
        print(f"{path.stem:<40} {seconds:7.1f} s  {cells:3d} code cells  {drawn:3d} views"
              + (f"  FAILED: {error}" if error else ""), flush=True)
        if error:
            failed.append(path.stem)
    print(f"{'all':<40} {total:7.1f} s; load average now {os.getloadavg()[0]:.2f}")
    if failed:
        print(f"notebooks that raised: {', '.join(failed)} (their HTML in {out_dir} shows where)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
