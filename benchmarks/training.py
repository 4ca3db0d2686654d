"""The translator's training step and decoding cost.

    .venv/bin/python benchmarks/training.py                      # (a) eager, bf16 and float32
    .venv/bin/python benchmarks/training.py --compile            # (a) plus torch.compile rows
    .venv/bin/python benchmarks/training.py --only b --checkpoint runs/multi30k_de_en/final

(a) One optimizer step of the ``configs/multi30k_de_en.toml`` model (pre-LN 3+3 layers,
    d=256, 4 heads, ffn 1024, the recipe's dropout, joint 8k BPE, shared and tied embeddings) on real
    Multi30k de→en batches (the recipe's token-budget batches, 4,096 tokens a side), against
    the same model built from ``torch.nn.Transformer`` (``norm_first=True``, ``batch_first``,
    embeddings × √d plus sinusoidal positions, tied output projection) with the same batches,
    optimizer (Adam β = (0.9, 0.98), ε = 1e-9), clipping (1.0) and label smoothing (0.1;
    ``F.cross_entropy(label_smoothing=0.1)`` for PyTorch, attnlab's
    ``label_smoothed_cross_entropy`` for attnlab). One sample = one step over each of
    ``--batches`` fixed batches; tokens/s counts real (non-pad) source + target tokens.
    Both run in this process after :func:`attnlab.runtime.keep_freed_memory`, as
    ``attnlab train`` does. With ``--compile`` both models are also wrapped in
    ``torch.compile`` (``dynamic=True``; compilation is excluded from the timing).
(b) Decoding ``test_2016_flickr`` with a trained checkpoint: greedy vs beam 5 (length
    penalty 0.6, batch 64, ``attnlab.tasks.translation.translate``), sentences/s, the cost
    ratio and sacreBLEU of each.

Candidates are measured interleaved round by round (``_timing.time_interleaved``); "ratio"
is the median of per-round attnlab/PyTorch speed ratios (≥ 1.0: attnlab is at least as fast).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attnlab.config import load_toml  # noqa: E402
from attnlab.data import TokenBatchSampler, TranslationDataset, load_multi30k, train_bpe  # noqa: E402
from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402
from attnlab.measure import timing as _timing  # noqa: E402
from attnlab.models import Transformer  # noqa: E402
from attnlab.runtime import keep_freed_memory  # noqa: E402
from attnlab.tasks.translation.recipe import TranslationRecipe  # noqa: E402
from attnlab.training import label_smoothed_cross_entropy, make_optimizer  # noqa: E402

RECIPE = Path(__file__).resolve().parents[1] / "configs" / "multi30k_de_en.toml"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="ab", help="subset of parts to run, e.g. 'a'")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds for (a)")
    p.add_argument("--batches", type=int, default=6, help="fixed training batches per sample")
    p.add_argument("--compile", action="store_true", help="add torch.compile rows to (a)")
    p.add_argument("--checkpoint", default="runs/multi30k_de_en/final", help="translator for (b)")
    p.add_argument("--limit", type=int, default=0, help="decode only the first N test sentences")
    return p.parse_args(argv)


def sinusoids(n: int, d: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...): ``(n, d)``."""
    angle = torch.arange(n)[:, None] / torch.pow(10000.0, torch.arange(0, d, 2) / d)  # (n, d/2)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)  # interleaved sin, cos


class TorchTranslator(nn.Module):
    """The recipe's model from ``torch.nn`` parts: the reference for part (a)."""

    def __init__(self, c) -> None:
        super().__init__()
        self.pad_id, self.d_model = c.pad_id, c.d_model
        self.embed = nn.Embedding(c.src_vocab_size, c.d_model)  # shared src / tgt, tied output
        self.register_buffer("pe", sinusoids(c.max_len, c.d_model), persistent=False)
        self.dropout = nn.Dropout(c.dropout)
        # nn.Transformer always asks its encoder for nested tensors, which norm_first disables
        warnings.filterwarnings("ignore", message="enable_nested_tensor is True")
        self.transformer = nn.Transformer(
            c.d_model, c.num_heads, c.num_encoder_layers, c.num_decoder_layers, c.ffn_dim,
            dropout=c.dropout, activation=c.activation, batch_first=True, norm_first=c.norm_first,
        )
        self.output = nn.Linear(c.d_model, c.src_vocab_size, bias=False)
        self.output.weight = self.embed.weight

    def _embed(self, ids: Tensor) -> Tensor:
        return self.dropout(self.embed(ids) * math.sqrt(self.d_model) + self.pe[: ids.shape[1]])

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1])
        src_pad = src == self.pad_id  # (B, S) True = padding (PyTorch's polarity)
        out = self.transformer(
            self._embed(src), self._embed(tgt_in), tgt_mask=causal, tgt_is_causal=True,
            src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad,
        )
        return self.output(out)  # (B, T, V)


def attnlab_loss(logits: Tensor, target: Tensor, pad_id: int) -> Tensor:
    return label_smoothed_cross_entropy(logits, target, epsilon=0.1, ignore_index=pad_id)[0]


def torch_loss(logits: Tensor, target: Tensor, pad_id: int) -> Tensor:
    return F.cross_entropy(
        logits.float().flatten(0, 1), target.flatten(), ignore_index=pad_id, label_smoothing=0.1,
        reduction="sum",
    )


def training_steps(model, loss_fn, batches, pad_id: int, bf16: bool) -> Callable[[], None]:
    """One optimizer step on each batch in turn (the recipe's step, minus the schedule)."""
    optimizer = make_optimizer(model, "adam", lr=1e-4)  # Adam(0.9, 0.98, eps 1e-9)
    forward = model.compiled if hasattr(model, "compiled") else model

    def steps() -> None:
        for b in batches:
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext():
                loss = loss_fn(forward(b.src, b.tgt_in), b.tgt_out, pad_id)
            (loss / b.num_tokens).backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()

    return steps


def load_batches(count: int):
    recipe = TranslationRecipe.from_dict(load_toml(RECIPE))
    pairs = load_multi30k("train", "de", "en")
    src_tok, tgt_tok = train_bpe([s for s, _ in pairs], [t for _, t in pairs], 8000, joint=True)
    data = TranslationDataset.from_pairs(pairs, src_tok, tgt_tok, max_len=recipe.data.max_len)
    sampler = TokenBatchSampler(data.lengths, recipe.data.max_tokens, seed=0)
    batches = [data.collate([data[i] for i in idx]) for idx in itertools.islice(sampler, count)]
    config = recipe.model.resolve(src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size)
    return config, batches


def bench_training(args: argparse.Namespace) -> list[str]:
    config, batches = load_batches(args.batches)
    tokens = sum(int((b.src != config.pad_id).sum()) + b.num_tokens for b in batches)
    modes = [("bf16 autocast", True), ("float32", False)]
    rows = [
        f"{len(batches)} batches, {tokens:,} real tokens (source + target), "
        f"mean batch {sum(b.src.shape[0] for b in batches) / len(batches):.0f} sentences",
        "",
        "| step | precision | torch.nn tokens/s | attnlab tokens/s | ratio (attnlab / torch) |",
        "|---|---|---:|---:|---:|",
    ]
    compiled = [False, True] if args.compile else [False]
    for use_compile in compiled:
        for label, bf16 in modes:
            torch.manual_seed(0)
            ours, ref = Transformer(config).train(), TorchTranslator(config).train()
            if use_compile:
                ours.compiled = torch.compile(ours, dynamic=True)
                ref.compiled = torch.compile(ref, dynamic=True)
            fns = {
                "torch": training_steps(ref, torch_loss, batches, config.pad_id, bf16),
                "attnlab": training_steps(ours, attnlab_loss, batches, config.pad_id, bf16),
            }
            samples = _timing.time_interleaved(fns, rounds=args.rounds, warmup=2, min_sample_s=0.0)
            speed = {k: tokens / _timing.median(v) for k, v in samples.items()}
            ratio = _timing.paired_ratio(samples["torch"], samples["attnlab"])
            step = "torch.compile" if use_compile else "eager"
            rows.append(
                f"| {step} | {label} | {speed['torch']:,.0f} | {speed['attnlab']:,.0f} | **{ratio:.2f}** |"
            )
            print(rows[-1], flush=True)
    return rows


def bench_decoding(args: argparse.Namespace) -> list[str]:
    from attnlab.pipelines import TranslationPipeline
    from attnlab.tasks.translation import score

    if not Path(args.checkpoint).exists():
        return [f"(b) skipped: no checkpoint at {args.checkpoint} (train configs/multi30k_de_en.toml)"]
    translator = TranslationPipeline.from_checkpoint(args.checkpoint)
    data = translator.recipe["data"]
    pairs = load_multi30k("test_2016_flickr", data["src_lang"], data["tgt_lang"])
    if args.limit:
        pairs = pairs[: args.limit]
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    rows = [
        f"{len(pairs)} sentences of test_2016_flickr, checkpoint {args.checkpoint}",
        "",
        "| decoder | seconds | sentences/s | sacreBLEU | chrF |",
        "|---|---:|---:|---:|---:|",
    ]
    seconds = {}
    for beam in (1, 5):
        start = time.perf_counter()
        with torch.inference_mode():
            hyps = translator.translate(sources, translator.settings(beam_size=beam))
        seconds[beam] = time.perf_counter() - start
        s = score(hyps, refs)
        name = "greedy" if beam == 1 else f"beam {beam}"
        rows.append(
            f"| {name} | {seconds[beam]:.1f} | {len(pairs) / seconds[beam]:.1f} | "
            f"{s['bleu']:.2f} | {s['chrf']:.2f} |"
        )
        print(rows[-1], flush=True)
    rows += ["", f"beam 5 costs **{seconds[5] / seconds[1]:.2f}×** the time of greedy decoding"]
    return rows


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    keep_freed_memory()
    _footprint.report_at_exit()
    print(_machine.header() + "\n", flush=True)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.processor() or 'cpu'}, "
        f"ATTNLAB_DATA={os.environ.get('ATTNLAB_DATA', '(unset)')}\n",
        flush=True,
    )
    if "a" in args.only:
        print("\n".join(["## (a) training step, attnlab vs torch.nn.Transformer", ""] + bench_training(args)))
        print()
    if "b" in args.only:
        print("\n".join(["## (b) decoding test_2016_flickr, greedy vs beam 5", ""] + bench_decoding(args)))


if __name__ == "__main__":
    main()
