"""The demo behind ``make demo`` (``attnlab demo``).

By default it trains the small German→English translator of ``configs/multi30k_demo.toml``
on Multi30k from scratch (from ``$ATTNLAB_DATA/multi30k``), then prints sacreBLEU and chrF on
``test_2016_flickr`` with their signatures and five sample translations, and saves the
alignment picture of one test sentence (the last decoder layer's cross-attention) — all into
``--out`` (default ``runs/demo``). That directory is the demo's own: each run replaces the
earlier demo run in it (``attnlab train --overwrite``, which says so and refuses a directory
no run wrote).
The translator trains on :data:`THREADS` torch thread unless ``--threads`` says otherwise:
the sums of a matrix product split over more threads round differently, so a recipe's
figures depend on the thread count. One thread gives the README's figures on every machine
of one kind — whatever its cores, and when another job holds some of them — in about seven
minutes on the 2-core machine of docs/benchmarks.md.
``--pooling`` runs the seconds-long attention-pooling lab of López et al. (Attention
Mechanisms) (:mod:`attnlab.labs.pooling`) instead, into ``--out`` (default
``runs/demo_pooling``, beside the translator's run, not in place of it).
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_OUT = "runs/demo"
DEFAULT_POOLING_OUT = "runs/demo_pooling"
DEMO_RECIPE = "multi30k_demo.toml"
THREADS = 1  # the README's figures are this many threads' (see the module docstring)


def find_recipe(name: str = DEMO_RECIPE) -> Path:
    """``configs/NAME`` in the working directory or in the source checkout attnlab runs from."""
    for root in (Path.cwd(), Path(__file__).resolve().parents[3]):
        if (path := root / "configs" / name).is_file():
            return path
    raise FileNotFoundError(
        f"configs/{name} not found in {Path.cwd()} or the attnlab source checkout; "
        f"run the demo from the repository root"
    )


def run_translation_demo(out_dir: str | Path = DEFAULT_OUT, data_dir: str | None = None) -> Path:
    """Train and score the demo translator into ``out_dir``; return its ``results.json``."""
    from attnlab.tasks import load_recipe, train

    out_dir = Path(out_dir)
    recipe_path = find_recipe()
    print(f"Demo: a German→English Transformer trained from scratch on Multi30k ({recipe_path.name})\n")
    train(load_recipe(recipe_path), run_dir=out_dir, data_dir=data_dir, overwrite=True)
    return out_dir / "results.json"


def run_pooling_demo(out_dir: str | Path = DEFAULT_POOLING_OUT) -> Path:
    """Run the attention-pooling lab (:mod:`attnlab.labs.pooling`) into ``out_dir``: print its
    report, write ``report.md``; return the path of the fits picture."""
    from attnlab.atomic import check_target
    from attnlab.labs import pooling
    from attnlab.labs.report import LabOptions

    print("Attention pooling (Nadaraya-Watson kernel regression), López et al. (Attention Mechanisms):\n")
    out_dir = check_target(out_dir, directory=True)  # created by its first picture
    report = pooling.run(out_dir, LabOptions())
    print(report.markdown())
    print(f"report: {report.write(out_dir).resolve()}")
    picture = report.figures[0].resolve()
    print(f"picture: {picture}")
    return picture
