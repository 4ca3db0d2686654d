"""nanoGPT's documented CPU run, attnlab against a plain-PyTorch reference, seed by seed.

    ATTNLAB_DATA=../shared/data .venv/bin/python benchmarks/nanogpt_cpu.py --seeds 1337 1 2 3
    ATTNLAB_DATA=../shared/data .venv/bin/python benchmarks/nanogpt_cpu.py --seeds 1337 1 2 3 \
        --variants nanogpt-model learned-untied rope-untied

nanoGPT's README trains its character model on tinyshakespeare on a CPU with 4 layers, 4 heads,
d = 128, block 64, batch 12, 2,000 iterations, dropout 0, lr 1e-3 → 1e-4 (cosine, warmup 100),
AdamW β = (0.9, 0.99), weight decay 0.1 on every 2-D parameter, clipping 1.0, and reports
"a loss of only 1.88" — estimated on 20 random validation batches, so a noisy number.

Everything that run sets is kept in ``configs/shakespeare_nanogpt_cpu.toml``; one choice it
leaves to the model is attnlab's: rotary positions (RoPE) instead of a learned position table.
For every seed this script trains the variants named by ``--variants``:

* ``recipe``: ``attnlab train --config configs/shakespeare_nanogpt_cpu.toml`` as shipped
  (in-process, ``train.seed = data.seed = SEED``);
* ``nanogpt-model``: the same with nanoGPT's exact model (learned positions);
* ``learned-untied`` / ``rope-untied``: an ablation with the output layer not tied to the
  token embedding;
* ``reference``: nanoGPT's exact model and recipe written here from ``torch.nn`` parts only
  (``nn.Linear``, ``nn.LayerNorm(bias=False)``, ``F.scaled_dot_product_attention(is_causal=True)``,
  ``nn.GELU``, tied embeddings, GPT-2 initialisation, ``torch.randint`` windows, nanoGPT's
  learning-rate rule), seeded with the same SEED,

and scores all of them the same way: the mean next-character loss over the **whole**
validation split (the last 10 % of the text) in non-overlapping 64-character windows. The
table shows each seed and the mean ± standard deviation over seeds — the spread is the
yardstick for comparing with nanoGPT's single 20-batch figure.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attnlab.data import load_tinyshakespeare
from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402
from attnlab.tasks import load_recipe
from attnlab.tasks import train as attnlab_train

RECIPE = Path(__file__).resolve().parents[1] / "configs" / "shakespeare_nanogpt_cpu.toml"
LAYERS, HEADS, WIDTH, BLOCK, BATCH, ITERS = 4, 4, 128, 64, 12, 2000
LR, MIN_LR, WARMUP, DECAY, BETAS, CLIP = 1e-3, 1e-4, 100, 0.1, (0.9, 0.99), 1.0
LEARNED, ROPE = 'model.positional="learned"', 'model.positional="rope"'
TIED, UNTIED = "model.tie_output=true", "model.tie_output=false"
ATTNLAB_VARIANTS = {  # name → overrides of the shipped recipe
    "recipe": [],
    "nanogpt-model": [LEARNED, TIED],
    "learned-untied": [LEARNED, UNTIED],
    "rope-untied": [ROPE, UNTIED],
}
VARIANTS = (*ATTNLAB_VARIANTS, "reference")


class Block(nn.Module):
    """Pre-LN block: x + attn(ln(x)), then x + mlp(ln(x)); no biases."""

    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(WIDTH, bias=False), nn.LayerNorm(WIDTH, bias=False)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH, bias=False)
        self.proj = nn.Linear(WIDTH, WIDTH, bias=False)
        self.mlp = nn.Sequential(
            nn.Linear(WIDTH, 4 * WIDTH, bias=False), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH, bias=False)
        )

    def forward(self, x: Tensor) -> Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)  # (B, n, d) each
        q, k, v = (t.view(b, n, HEADS, d // HEADS).transpose(1, 2) for t in (q, k, v))  # (B, H, n, d_h)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, n, d_h)
        x = x + self.proj(y.transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.ln2(x))


class ReferenceGPT(nn.Module):
    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, WIDTH), nn.Embedding(BLOCK, WIDTH)
        self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(WIDTH, bias=False)
        self.head = nn.Linear(WIDTH, vocab, bias=False)
        self.head.weight = self.tok.weight
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)
        for block in self.blocks:  # residual projections: std 0.02 / sqrt(2 L)
            for w in (block.proj.weight, block.mlp[2].weight):
                nn.init.normal_(w, std=0.02 / math.sqrt(2 * LAYERS))

    def forward(self, idx: Tensor) -> Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))  # (B, n, d)
        return self.head(self.ln_f(self.blocks(x)))  # (B, n, V)


def lr_at(it: int) -> float:
    if it < WARMUP:
        return LR * (it + 1) / (WARMUP + 1)
    ratio = min(1.0, (it - WARMUP) / (ITERS - WARMUP))
    return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (LR - MIN_LR)


@torch.no_grad()
def whole_split_loss(model: nn.Module, ids: Tensor) -> float:
    """Mean next-token loss over non-overlapping BLOCK-token windows of ``ids``."""
    n = (ids.numel() - 1) // BLOCK
    x, y = ids[: n * BLOCK].view(n, BLOCK), ids[1 : n * BLOCK + 1].view(n, BLOCK)
    total = sum(
        float(F.cross_entropy(model(x[i : i + 64]).flatten(0, 1), y[i : i + 64].flatten(), reduction="sum"))
        for i in range(0, n, 64)
    )
    return total / y.numel()


def train_reference(text: str, seed: int) -> tuple[float, float]:
    chars = sorted(set(text))  # nanoGPT's 65-character vocabulary
    lookup = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([lookup[c] for c in text])
    split = int(0.9 * len(ids))
    train_ids, val_ids = ids[:split], ids[split:]
    torch.manual_seed(seed)
    model = ReferenceGPT(len(chars))
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": DECAY},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=LR, betas=BETAS)
    offsets = torch.arange(BLOCK + 1)
    start = time.perf_counter()
    for it in range(ITERS):
        for g in opt.param_groups:
            g["lr"] = lr_at(it)
        starts = torch.randint(len(train_ids) - BLOCK, (BATCH,))
        window = train_ids[starts[:, None] + offsets]  # (B, BLOCK + 1)
        logits = model(window[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), window[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
    seconds = time.perf_counter() - start
    model.eval()
    return whole_split_loss(model, val_ids), seconds


def train_attnlab(seed: int, overrides: list[str]) -> tuple[float, float]:
    seeded = [f"train.seed={seed}", f"data.seed={seed}", "train.progress=false"]
    recipe = load_recipe(RECIPE, [*overrides, *seeded])
    with tempfile.TemporaryDirectory() as run_dir, contextlib.redirect_stdout(io.StringIO()):
        attnlab_train(recipe, run_dir=run_dir)  # its own log would break the table
        results = json.loads((Path(run_dir) / "results.json").read_text())
    return results["val_loss"], results["wall_time_s"]


def train_variant(name: str, text: str, seed: int) -> tuple[float, float]:
    """(whole-split val loss, seconds) of one variant trained with one seed."""
    if name == "reference":
        return train_reference(text, seed)
    return train_attnlab(seed, ATTNLAB_VARIANTS[name])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[1337, 1, 2, 3])
    p.add_argument("--variants", nargs="+", choices=VARIANTS, default=["recipe", "reference"])
    args = p.parse_args(argv)
    text = load_tinyshakespeare()
    _footprint.report_at_exit()
    print(_machine.header() + "\n", flush=True)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads\n", flush=True)
    losses: dict[str, list[float]] = {name: [] for name in args.variants}
    print("| seed | " + " | ".join(f"{v} val loss | {v} s" for v in args.variants) + " |")
    print("|---:|" + "---:|---:|" * len(args.variants))
    for seed in args.seeds:
        cells = []
        for name in args.variants:
            loss, seconds = train_variant(name, text, seed)
            losses[name].append(loss)
            cells.append(f"{loss:.4f} | {seconds:.0f}")
        print(f"| {seed} | " + " | ".join(cells) + " |", flush=True)
    summary = []
    for values in losses.values():
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        summary.append(f"{statistics.mean(values):.4f} ± {spread:.4f} | ")
    print(f"| mean ± sd, {len(args.seeds)} seeds | " + " | ".join(summary) + " |")


if __name__ == "__main__":
    sys.exit(main())
