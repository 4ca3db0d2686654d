"""Where the tests find the repository, whichever folder of ``tests/`` they sit in: its root,
``src/``, ``configs/``, the test helpers and fixtures, and the shared data beside the checkout
(``../shared/data``, the default of ``$ATTNLAB_DATA`` in tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SRC = ROOT / "src"
CONFIGS = ROOT / "configs"
FIXTURES = TESTS / "fixtures"
SHARED_DATA = ROOT.parent / "shared" / "data"
