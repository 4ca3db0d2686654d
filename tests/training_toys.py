"""Tiny models and synthetic batches for the training tests (no attnlab models or data)."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

import numpy as np
import pytest
import torch
from torch import nn

from attnlab.training.losses import label_smoothed_cross_entropy
from repo_paths import CONFIGS

PAD = 0


@dataclass
class ToyConfig:
    vocab: int = 13
    d: int = 8
    dropout: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


class ToyLM(nn.Module):
    """Embedding -> LayerNorm -> Linear -> tanh -> Linear head: (B, T) -> (B, T, V)."""

    model_type = "toy_lm"

    def __init__(self, config: ToyConfig | None = None):
        super().__init__()
        self.config = config = config or ToyConfig()
        self.emb = nn.Embedding(config.vocab, config.d)
        self.norm = nn.LayerNorm(config.d)
        self.drop = nn.Dropout(config.dropout)
        self.proj = nn.Linear(config.d, config.d)
        self.head = nn.Linear(config.d, config.vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop(self.emb(x))  # (B, T, d)
        h = torch.tanh(self.proj(self.norm(h)))  # (B, T, d)
        return self.head(h)  # (B, T, V)


def make_model(seed: int = 0, dtype=torch.float32, **kw) -> ToyLM:
    torch.manual_seed(seed)
    return ToyLM(ToyConfig(**kw)).to(dtype)


def make_batches(
    n: int, batch_size: int = 3, seq_len: int = 6, vocab: int = 13, seed: int = 0
) -> list[dict[str, torch.Tensor]]:
    """``n`` batches of inputs ``x`` and targets ``y`` (B, T); targets padded with PAD at
    random lengths >= 1."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = torch.randint(1, vocab, (batch_size, seq_len), generator=g)  # (B, T)
        y = torch.randint(1, vocab, (batch_size, seq_len), generator=g)  # (B, T)
        lengths = torch.randint(1, seq_len + 1, (batch_size,), generator=g)  # (B,)
        y[torch.arange(seq_len)[None, :] >= lengths[:, None]] = PAD
        out.append({"x": x, "y": y})
    return out


def concat(batches: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {k: torch.cat([b[k] for b in batches]) for k in batches[0]}


def lm_loss(model: nn.Module, batch: dict[str, torch.Tensor]):
    """Summed label-smoothed loss and the target-token count of one batch."""
    return label_smoothed_cross_entropy(model(batch["x"]), batch["y"], ignore_index=PAD)


def noisy_lm_loss(model: nn.Module, batch: dict[str, torch.Tensor]):
    """Like :func:`lm_loss` but consuming python, numpy and torch global RNG, so a resumed
    run matches only if all three RNG states were restored."""
    crop = random.randint(1, batch["x"].shape[1])
    scale = 1.0 + float(np.random.rand())
    noise = torch.rand(()).item()
    logits = model(batch["x"][:, :crop]) * scale + noise  # (B, crop, V)
    return label_smoothed_cross_entropy(logits, batch["y"][:, :crop], ignore_index=PAD)


class EpochShuffled:
    """Batches re-ordered per epoch by a generator seeded with (seed, epoch)."""

    def __init__(self, batches, seed: int = 0):
        self.batches, self.seed = batches, seed

    def __call__(self, epoch: int):
        g = torch.Generator().manual_seed(self.seed * 1000 + epoch)
        return [self.batches[i] for i in torch.randperm(len(self.batches), generator=g).tolist()]


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors: one intra-op thread (two threads on a busy 2-core machine spin-wait)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# A 4-step run of configs/ntm_copy.toml through `attnlab train`: no corpus, about a second.
NTM = CONFIGS / "ntm_copy.toml"
TINY = [
    "train.max_steps=4", "optim.warmup=1", "train.save_every=2", "train.eval_every=2",
    "eval.val_sequences=2", "eval.test_lengths=[5]", "eval.test_sequences=2", "model.controller_dim=8",
    "model.memory_size=8", "data.max_length=5", "train.progress=false", "train.log_every=1",
]
