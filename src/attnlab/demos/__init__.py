"""Small, self-contained demos that show the lectures' ideas in a picture.

* :mod:`~attnlab.demos.pooling` — attention pooling as kernel regression (seed 002).

Each demo module has ``run(out_dir) -> Path`` that prints a short report and saves a figure.
Modules are imported on demand (they pull in matplotlib).
"""
