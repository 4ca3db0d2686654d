"""The GPT training step against a plain-PyTorch GPT and the bf16 matmul ceiling.

    .venv/bin/python benchmarks/gpt_training.py                 # bf16 autocast, 2 threads
    .venv/bin/python benchmarks/gpt_training.py --float32 --rounds 3
    .venv/bin/python benchmarks/gpt_training.py --compile        # also both under torch.compile

One AdamW step (β = (0.9, 0.95), weight decay 0.1, clipping 1.0) of a GPT — 10.8 M
parameters: d = 384, 6 layers, 6 heads, FFN 1536, GELU, pre-LN, learned positions, output tied
to the token embedding, vocabulary 65 (tinyshakespeare's characters) — on a batch of 16 × 256
real tinyshakespeare characters, with bf16 autocast:

* **reference**: the same model written with ``nn.TransformerEncoderLayer(norm_first=True,
  activation="gelu", batch_first=True)`` under ``nn.TransformerEncoder`` (causal mask,
  ``is_causal=True``), ``F.cross_entropy`` and ``torch.optim.AdamW`` with PyTorch's defaults;
* **attnlab**: :class:`~attnlab.models.GPT`, the loss of ``attnlab train``
  (:func:`~attnlab.tasks.language_model.lm_loss`) and its optimizer
  (:func:`~attnlab.training.make_optimizer`).

Both start from the same weights and see the same batches. Model FLOPs per token count the
matmuls only: ``6 · N_matmul`` (forward + backward of every weight matrix, the tied output
layer included, embeddings excluded) plus ``6 · L · T · d`` for causal attention (``QKᵀ`` and
``AV``: ``2 · 2 · T · d`` per layer and token forward, halved by the causal mask, ×3 with the
backward). "Share" is model-GFLOP/s over the bf16 matmul ceiling the header measured a moment
before, on the same cores. Rounds are interleaved; the ratio is the median of per-round
ratios (≥ 1: attnlab is faster).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attnlab.data.corpora import load_tinyshakespeare  # noqa: E402
from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402
from attnlab.measure import timing as _timing  # noqa: E402
from attnlab.models import GPT, GPTConfig  # noqa: E402
from attnlab.runtime import keep_freed_memory  # noqa: E402
from attnlab.tasks.language_model import lm_loss  # noqa: E402
from attnlab.training import make_optimizer  # noqa: E402

VOCAB, D, LAYERS, HEADS, BATCH, T = 65, 384, 6, 6, 16, 256


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--steps", type=int, default=3, help="optimizer steps per sample (default 3)")
    p.add_argument("--float32", action="store_true", help="no autocast (float32 throughout)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    p.add_argument("--compile", action="store_true",
                   help="also both models under torch.compile, as `attnlab train` runs with "
                        "train.compile = true (compilation is done in the warm-up, not timed)")
    return p.parse_args(argv)


class PlainGPT(nn.Module):
    """The reference: the same GPT from ``torch.nn`` parts (weights copied from attnlab's)."""

    def __init__(self, ours: GPT) -> None:
        super().__init__()
        c = ours.config
        self.tok, self.pos = nn.Embedding(VOCAB, D), nn.Embedding(c.block_size, D)
        layer = nn.TransformerEncoderLayer(D, HEADS, 4 * D, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, LAYERS, norm=nn.LayerNorm(D),
                                            enable_nested_tensor=False)
        self.head = nn.Linear(D, VOCAB, bias=False)
        self.head.weight = self.tok.weight  # tied, as attnlab's
        self.load_state_dict(reference_state(ours), strict=True)

    def forward(self, idx: Tensor) -> Tensor:
        n = idx.shape[1]
        x = self.tok(idx) + self.pos.weight[:n]  # (B, n, d)
        causal = nn.Transformer.generate_square_subsequent_mask(n)
        return self.head(self.blocks(x, mask=causal, is_causal=True))  # (B, n, V)


def reference_state(ours: GPT) -> dict[str, Tensor]:
    """attnlab's GPT weights under ``PlainGPT``'s names."""
    names = {"tok_embed.weight": "tok.weight", "pos.absolute.embedding.weight": "pos.weight",
             "decoder.norm.weight": "blocks.norm.weight", "decoder.norm.bias": "blocks.norm.bias",
             "head.weight": "head.weight"}
    inside = {"self_attn.in_proj.weight": "self_attn.in_proj_weight",
              "self_attn.in_proj.bias": "self_attn.in_proj_bias",
              "self_attn.out_proj.weight": "self_attn.out_proj.weight",
              "self_attn.out_proj.bias": "self_attn.out_proj.bias",
              "ffn.w1.weight": "linear1.weight", "ffn.w1.bias": "linear1.bias",
              "ffn.w2.weight": "linear2.weight", "ffn.w2.bias": "linear2.bias",
              "norm1.weight": "norm1.weight", "norm1.bias": "norm1.bias",
              "norm2.weight": "norm2.weight", "norm2.bias": "norm2.bias"}
    out = {}
    for name, t in ours.state_dict().items():
        if name in names:
            out[names[name]] = t.clone()
            continue
        _, _, i, rest = name.split(".", 3)  # decoder.layers.<i>.<rest>
        out[f"blocks.layers.{i}.{inside[rest]}"] = t.clone()
    return out


def model_flops_per_token(model: GPT) -> float:
    """``6 · N_matmul + 6 · L · T · d`` (module docstring)."""
    n_matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    return 6 * n_matmul + 6 * LAYERS * T * D


def batches(count: int) -> list[tuple[Tensor, Tensor]]:
    """``count`` batches of 16 × 256 tinyshakespeare characters and their next characters."""
    text = load_tinyshakespeare()
    vocab = {ch: i for i, ch in enumerate(sorted(set(text)))}
    ids = torch.tensor([vocab[ch] for ch in text[: 200_000]], dtype=torch.long)
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(count):
        starts = torch.randint(0, ids.numel() - T - 1, (BATCH,), generator=g)
        x = torch.stack([ids[s : s + T] for s in starts.tolist()])
        y = torch.stack([ids[s + 1 : s + T + 1] for s in starts.tolist()])
        out.append((x, y))
    return out


def reference_step(model: PlainGPT, data, bf16: bool, compiled: bool = False) -> Callable[[], None]:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    forward = torch.compile(model) if compiled else model

    def steps() -> None:
        for x, y in data:
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext():
                loss = F.cross_entropy(forward(x).float().flatten(0, 1), y.flatten())
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()

    return steps


def attnlab_step(model: GPT, data, bf16: bool, compiled: bool = False) -> Callable[[], None]:
    opt = make_optimizer(model, "adamw", lr=1e-4, weight_decay=0.1)
    forward = torch.compile(model) if compiled else model  # what the trainer does

    def steps() -> None:
        for batch in data:
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext():
                loss, count = lm_loss(forward, batch)
            (loss / count).backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()

    return steps


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    keep_freed_memory()
    _footprint.report_at_exit()
    header = _machine.header()
    print(header + "\n", flush=True)
    ceiling = _machine.matmul_gflops(torch.float32 if args.float32 else torch.bfloat16)
    torch.manual_seed(0)
    ours = GPT(GPTConfig(vocab_size=VOCAB, block_size=T, d_model=D, num_heads=HEADS,
                         num_layers=LAYERS, dropout=0.0)).train()
    ref = PlainGPT(ours).train()
    data = batches(args.steps)
    bf16 = not args.float32
    fns = {"reference": reference_step(ref, data, bf16), "attnlab": attnlab_step(ours, data, bf16)}
    if args.compile:  # separate copies: each optimizer steps its own weights
        ours_c, ref_c = copy.deepcopy(ours), copy.deepcopy(ref)
        fns["reference, compiled"] = reference_step(ref_c, data, bf16, compiled=True)
        fns["attnlab, compiled"] = attnlab_step(ours_c, data, bf16, compiled=True)
    samples = _timing.time_interleaved(fns, rounds=args.rounds, warmup=1, min_sample_s=0.0)
    flops = model_flops_per_token(ours)
    tokens = args.steps * BATCH * T
    precision = "float32" if args.float32 else "bf16 autocast"
    print(f"GPT {sum(p.numel() for p in ours.parameters()):,} parameters, {precision}, "
          f"B {BATCH} × T {T}, {flops / 1e6:.1f} model-MFLOP per token, "
          f"{'fp32' if args.float32 else 'bf16'} ceiling {ceiling:,.0f} GFLOP/s "
          f"(measured again just before), {args.rounds} rounds of {args.steps} steps, "
          f"ATTNLAB_DATA={os.environ.get('ATTNLAB_DATA', '(unset)')}\n")
    print("| step | tokens/s | model GFLOP/s | share of the ceiling |")
    print("|---|---:|---:|---:|")
    for name, times in samples.items():
        speed = tokens / _timing.median(times)
        print(f"| {name} | {speed:,.0f} | {speed * flops / 1e9:,.0f} | {speed * flops / 1e9 / ceiling:.0%} |")
    ratio = _timing.paired_ratio(samples["reference"], samples["attnlab"])
    print(f"\nattnlab / reference speed: **{ratio:.2f}×** (goals: ≥ 1.5× and ≥ 60 % of the bf16 ceiling)")
    if args.compile:
        both = _timing.paired_ratio(samples["reference, compiled"], samples["attnlab, compiled"])
        eager = _timing.paired_ratio(samples["reference"], samples["attnlab, compiled"])
        print(f"compiled attnlab / compiled reference: **{both:.2f}×**; "
              f"compiled attnlab / eager reference: **{eager:.2f}×**")


if __name__ == "__main__":
    main()
