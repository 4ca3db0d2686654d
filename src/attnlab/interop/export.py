"""Any attnlab model that has a Hugging Face class, as that class's folder (:func:`save_hf`).

* a GPT: ``GPT2LMHeadModel`` (learned positions, LayerNorm, GELU, biases;
  :mod:`~attnlab.interop.gpt2`) or ``LlamaForCausalLM`` (RoPE, RMSNorm, SwiGLU, no biases, any
  grouped-query heads; :mod:`~attnlab.interop.llama`);
* the encoder-decoder translator: ``MarianMTModel`` (post-LN) or
  ``PegasusForConditionalGeneration`` (pre-LN; :mod:`~attnlab.interop.marian`);
* a BERT-style encoder: ``BertModel`` (:mod:`~attnlab.interop.bert`).

A model that none can hold is refused in one line naming, for each class, the option it lacks.
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from attnlab.interop import gpt2, llama, marian
from attnlab.interop.bert import save_bert
from attnlab.interop.hf_folders import refuse_options
from attnlab.models import GPT, Encoder, Transformer

ARCHITECTURES = (("GPT2LMHeadModel", gpt2.REQUIRED, gpt2.save_gpt2),
                 ("LlamaForCausalLM", llama.REQUIRED, llama.save_llama))


def save_hf(model: nn.Module, directory: str | Path, *, tokenizer_json: str | None = None,
            **tokenizers) -> tuple[Path, str]:
    """Write ``model`` as the Hugging Face folder of its class; ``(folder, class name)``.
    ``tokenizer_json``: the tokenizer ``AutoTokenizer`` loads from the folder; ``tokenizers``:
    the translator's further ones (:func:`~attnlab.interop.marian.save_marian`)."""
    if type(model) is Transformer:  # not a subclass: the speech Transformer's front end has no Marian twin
        name = marian.CLASSES[marian.check_translator(model.config)]
        return marian.save_marian(model, directory, tokenizer_json=tokenizer_json, **tokenizers), name
    if isinstance(model, Encoder):
        return save_bert(model, directory, tokenizer_json=tokenizer_json), "BertModel"
    if not isinstance(model, GPT):
        raise ValueError(f"{type(model).__name__} has no Hugging Face class: a GPT, the translator "
                         "(Transformer) or a BERT-style encoder exports")
    refusals = []
    for name, required, save in ARCHITECTURES:
        try:
            refuse_options(model.config, required, name)
        except ValueError as err:
            refusals.append(str(err))
            continue
        return save(model, directory, tokenizer_json=tokenizer_json), name
    raise ValueError("; ".join(refusals))
