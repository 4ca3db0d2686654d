"""Shared test set-up.

Tests run single-threaded: the suite is many small tensor operations, for which OpenMP's
thread start-up costs more than it saves on a 2-core machine (and CI may run other work
beside it). The real corpora are found through ATTNLAB_DATA, defaulting to the
``shared/data`` folder beside the repository.
"""

import atexit
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)
os.environ.setdefault("OMP_NUM_THREADS", "1")  # the CLI's default threads, in-process and in subprocesses

# The tests sit in folders mirroring src/ and import their helpers (explorer_toys, repo_paths,
# ...) from this folder, whatever folder pytest puts on the path for the test itself.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from repo_paths import SHARED_DATA as _DEFAULT_DATA  # noqa: E402

if "ATTNLAB_DATA" not in os.environ and _DEFAULT_DATA.is_dir():
    os.environ["ATTNLAB_DATA"] = str(_DEFAULT_DATA)
# Prepared token files go to a cache of the session's own (shared by its tests and the commands
# they start), never the user's ~/.cache.
os.environ["ATTNLAB_CACHE"] = tempfile.mkdtemp(prefix="attnlab-cache-")
atexit.register(shutil.rmtree, os.environ["ATTNLAB_CACHE"], True)


# A suite started in the background of a non-interactive shell (``make test &``, nohup) inherits
# SIGINT ignored, and so would every command a test starts, so the Ctrl-C tests would see no
# Ctrl-C. Python's own handler here means the children start with the default action again
# (an ignored signal stays ignored across exec; a handled one is reset).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# The explorer's tests (test_explorer_*.py) share these: the tiny translator, GPT and encoder of
# tests/explorer_toys.py, built once a module, and Starlette's test client over them.
@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from explorer_toys import tiny_models

    return tiny_models(tmp_path_factory.mktemp("explorer"))


@pytest.fixture(scope="module")
def client(models):
    from explorer_toys import api_client

    with api_client(models) as test_client:
        yield test_client


# SmolLM2 (tests/smollm2_fixtures.py): attnlab's pipeline and transformers' reference, loaded once
# a session for every test that needs a real LLM.
from smollm2_fixtures import reference, smollm2, two_threads  # noqa: E402,F401
