"""Fixtures the decoding tests share: one torch thread for their tiny models, the toy
translator and a batch of its sources."""

import pytest
import torch

from generation_toys import reversal_batch, toy_translator
from threads import torch_threads


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models: one thread avoids OpenMP overhead on the shared cores (restored after)."""
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def translator():
    return toy_translator()


@pytest.fixture(scope="module")
def batch():
    src, _ = reversal_batch(8, torch.Generator().manual_seed(1))
    return src
