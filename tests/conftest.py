"""Shared test set-up.

Tests run single-threaded: the suite is many small tensor operations, for which OpenMP's
thread start-up costs more than it saves on a 2-core machine (and CI may run other work
beside it). The real corpora are found through ATTNLAB_DATA, defaulting to the
``shared/data`` folder beside the repository.
"""

import os
from pathlib import Path

import torch

torch.set_num_threads(1)
os.environ.setdefault("OMP_NUM_THREADS", "1")  # the CLI's default threads, in-process and in subprocesses

_DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
if "ATTNLAB_DATA" not in os.environ and _DEFAULT_DATA.is_dir():
    os.environ["ATTNLAB_DATA"] = str(_DEFAULT_DATA)
