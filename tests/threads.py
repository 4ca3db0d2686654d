"""The torch thread count a group of tests runs with, restored after them."""

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run the block on ``count`` torch threads, then the count before it."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)
