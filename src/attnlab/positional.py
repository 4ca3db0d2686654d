"""``attnlab.positional``: the public path of the positional schemes, which live in
:mod:`attnlab.modules.positional` with the Transformer's other building blocks."""

from attnlab.modules import positional as _positional
from attnlab.modules.positional import *  # noqa: F403  (the same names, under the public path)

__all__ = _positional.__all__
