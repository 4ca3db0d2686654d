"""A GPT as the Hugging Face class its architecture is: ``GPT2LMHeadModel`` (learned
positions, LayerNorm, GELU, biases; :mod:`~attnlab.interop.gpt2`) or ``LlamaForCausalLM``
(RoPE, RMSNorm, SwiGLU, no biases, any grouped-query heads; :mod:`~attnlab.interop.llama`).
A GPT that is neither is refused in one line naming, for each, the option it lacks."""

from __future__ import annotations

from pathlib import Path

from attnlab.interop import gpt2, llama
from attnlab.interop.hf_folders import refuse_options
from attnlab.models import GPT

ARCHITECTURES = (("GPT2LMHeadModel", gpt2.REQUIRED, gpt2.save_gpt2),
                 ("LlamaForCausalLM", llama.REQUIRED, llama.save_llama))


def save_hf(model: GPT, directory: str | Path, *, tokenizer_json: str | None = None) -> tuple[Path, str]:
    """Write ``model`` as the Hugging Face folder of its architecture; ``(folder, class name)``."""
    refusals = []
    for name, required, save in ARCHITECTURES:
        try:
            refuse_options(model.config, required, name)
        except ValueError as err:
            refusals.append(str(err))
            continue
        return save(model, directory, tokenizer_json=tokenizer_json), name
    raise ValueError("; ".join(refusals))
