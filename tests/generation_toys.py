"""Tiny models for the decoding tests (greedy, beam search, sampling).

* :func:`toy_translator` — a 1-layer :class:`Transformer` trained for a few dozen steps to
  reverse a sequence, so its outputs depend on the source and end with eos at varied lengths;
* :func:`tiny_gpt` — a random :class:`GPT` with a sharpened output layer (peaked, varied logits);
* :class:`BigramStub` — a decoder-only stub whose next-token logits are a fixed table row
  of the last token: known distributions for sharp sampling tests.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention.multihead import KVCache
from attnlab.models import GPT, GPTConfig, ModelCache, Transformer, TransformerConfig

PAD, BOS, EOS = 0, 1, 2
VOCAB = 10  # content tokens 3..9


def reversal_batch(n: int, generator: torch.Generator, max_len: int = 6) -> tuple[Tensor, Tensor]:
    """``n`` random sources ``(n, max_len)`` (right-padded) and targets ``bos, reversed, eos``."""
    lengths = torch.randint(2, max_len + 1, (n,), generator=generator)
    src = torch.full((n, max_len), PAD, dtype=torch.long)
    tgt = torch.full((n, max_len + 2), PAD, dtype=torch.long)
    for i, length in enumerate(lengths.tolist()):
        seq = torch.randint(3, VOCAB, (length,), generator=generator)
        src[i, :length] = seq
        tgt[i, 0], tgt[i, 1 : length + 1], tgt[i, length + 1] = BOS, seq.flip(0), EOS
    return src, tgt


def toy_translator(steps: int = 60, seed: int = 0, **overrides) -> Transformer:
    """A small Transformer partly trained to reverse its source (eval mode)."""
    torch.manual_seed(seed)
    config = dict(
        src_vocab_size=VOCAB,
        d_model=32,
        num_heads=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        d_ff=64,
        dropout=0.0,
        pad_id=PAD,
    )
    model = Transformer(TransformerConfig(**{**config, **overrides}))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        src, tgt = reversal_batch(32, gen)
        logits = model(src, tgt[:, :-1])  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt[:, 1:].reshape(-1), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def tiny_gpt(
    positional: str = "learned",
    *,
    vocab_size: int = 17,
    block_size: int = 16,
    sharpen: float = 40.0,
    seed: int = 0,
) -> GPT:
    """A random 2-layer GPT whose (untied) output layer is scaled up for peaked logits."""
    torch.manual_seed(seed)
    config = GPTConfig(
        vocab_size=vocab_size,
        block_size=block_size,
        d_model=32,
        num_heads=2,
        num_layers=2,
        positional=positional,
        tie_output=False,
    )
    model = GPT(config)
    with torch.no_grad():
        model.head.weight.mul_(sharpen)
    return model.eval()


class _Config:
    def __init__(self, vocab_size: int, block_size: int) -> None:
        self.vocab_size, self.block_size = vocab_size, block_size


class BigramStub(nn.Module):
    """``model(idx, cache=None)`` → logits ``(B, n, V)`` = ``table[idx]``: the next token depends
    on the last token only, through the known ``table`` ``(V, V)``."""

    def __init__(self, table: Tensor, block_size: int = 64) -> None:
        super().__init__()
        self.table = nn.Parameter(table.clone().float(), requires_grad=False)
        self.config = _Config(table.shape[0], block_size)

    def new_cache(self) -> ModelCache:
        return ModelCache([KVCache()])

    def forward(self, idx: Tensor, *, cache: ModelCache | None = None) -> Tensor:
        return self.table[idx]  # (B, n, V)
