"""The types of the command line's numbers: every number an option takes is parsed and bounded
here, so a value out of range is refused by argparse in one line naming the option
(``argument --seed: must be in [0, 2^64 - 1], got 99999999999999999999``) before anything runs.

Bounds are what the value can mean, not taste: a seed is what :func:`torch.manual_seed` takes,
a thread count at most :data:`MAX_THREADS`, a count of tokens or sentences at most
:data:`MAX_COUNT` (memory is checked later, from the sizes, by :mod:`attnlab.memory`).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

MAX_COUNT = 2**31 - 1  # sentences, tokens, beams: anything that sizes a tensor dimension
MAX_THREADS = 4096
MAX_SEED = 2**64 - 1  # torch.manual_seed takes [-2^63, 2^64 - 1]; seeds here are >= 0


def _shown(bound: float) -> str:
    return {MAX_SEED: "2^64 - 1", MAX_COUNT: "2^31 - 1"}.get(bound, f"{bound:g}")


def _range(low: float, high: float, low_open: bool) -> str:
    """``>= 1``, ``in [0, 65535]`` or ``in (0, 1]``."""
    if high == math.inf:
        return f"{'>' if low_open else '>='} {_shown(low)}"
    return f"in {'(' if low_open else '['}{_shown(low)}, {_shown(high)}]"


def number(
    kind: type, low: float, high: float = math.inf, *, low_open: bool = False
) -> Callable[[str], float]:
    """An argparse type: a ``kind`` (``int`` or ``float``) in ``[low, high]`` (``(low, high]``
    with ``low_open``); NaN, infinities and values outside are refused naming the range."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {'an integer' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        below = value <= low if low_open else value < low
        if below or value > high or not math.isfinite(value):  # nan and inf too
            raise argparse.ArgumentTypeError(f"must be {_range(low, high, low_open)}, got {text}")
        return value

    return parse


COUNT = number(int, 1, MAX_COUNT)
"""A positive count: beams, batch sizes, tokens to generate, top-k."""
THREADS = number(int, 1, MAX_THREADS)
SEED = number(int, 0, MAX_SEED)
NON_NEGATIVE = number(float, 0.0, math.inf)
PROBABILITY = number(float, 0.0, 1.0, low_open=True)
"""A probability mass in (0, 1]: nucleus sampling's top-p."""
