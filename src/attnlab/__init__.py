"""attnlab: the Transformer and the attention family, written from the lecture equations up.

The top-level import is light: subpackages (``attnlab.attention``, ``attnlab.models``, ...)
import torch only when they are used.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
