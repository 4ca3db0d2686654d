"""Training speed of the three translators side by side, and what bf16 and fused RNNs buy.

    ATTNLAB_DATA=../shared/data .venv/bin/python benchmarks/rnn_speed.py [--rounds 3] [--batches 4] \
        [--only translators|lm] [--threads N]

(a) One optimizer step (Adam, clipping 1.0, label smoothing 0.1) on each of ``--batches`` real
    Multi30k de→en batches (the recipes' 4,096-token budget) for the models of
    ``configs/multi30k_de_en.toml`` (Transformer), ``multi30k_bahdanau.toml`` (bi-GRU + additive
    attention) and ``multi30k_rnn.toml`` (Cho's GRU encoder-decoder), in float32 and with bf16
    autocast, all measured interleaved in this process: tokens/s (real source + target tokens)
    and the ratio to the Transformer in float32.
(b) The bi-GRU encoder of the Bahdanau model, forward and backward: PyTorch's fused ``nn.GRU``
    over packed sequences (what :class:`~attnlab.models.AttentionSeq2Seq` uses) against the
    same weights stepped through ``nn.GRUCell`` one position at a time (padding masked), in
    float32 and bf16; both get the same embedded batch (no dropout, no id checks). The decoder
    cannot be fused: its input at step i depends on the alignment
    computed from s_{i-1}.
(c) One training step (AdamW, clipping 1.0, the recipes' windows of real text) of the LSTM and
    the LSTMN language models at equal parameters: ``configs/shakespeare_lstm.toml`` against
    ``shakespeare_lstmn.toml`` (characters, where the recurrence is the whole cost) and
    ``kjv_lstm.toml`` against ``kjv_lstmn.toml`` (words, where the 12.5 k-word output layer is
    most of it); ms a step and the LSTMN's time over the LSTM's (``nn.LSTM``, fused).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from contextlib import nullcontext
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from attnlab.data import LMDataset, TokenBatchSampler, TranslationDataset, load_multi30k, train_bpe  # noqa: E402
from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402
from attnlab.measure import timing as _timing  # noqa: E402
from attnlab.runtime import keep_freed_memory  # noqa: E402
from attnlab.tasks import load_recipe  # noqa: E402
from attnlab.tasks.language_model import LMRecipe, lm_loss  # noqa: E402
from attnlab.tasks.language_model.task import prepare_corpus  # noqa: E402
from attnlab.tasks.translation.recipe import TranslationRecipe  # noqa: E402
from attnlab.training import label_smoothed_cross_entropy, make_optimizer  # noqa: E402

LM_PAIRS = {"tinyshakespeare, characters": ("shakespeare_lstm.toml", "shakespeare_lstmn.toml"),
            "King James Bible, words": ("kjv_lstm.toml", "kjv_lstmn.toml")}
RECIPES = {
    "Transformer": "multi30k_de_en.toml",
    "Bahdanau (additive)": "multi30k_bahdanau.toml",
    "Cho (no attention)": "multi30k_rnn.toml",
}


def batches_and_models(count: int) -> tuple[list, dict[str, nn.Module]]:
    pairs = load_multi30k("train", "de", "en")
    src_tok, tgt_tok = train_bpe([s for s, _ in pairs], [t for _, t in pairs], 8000, joint=True)
    data = TranslationDataset.from_pairs(pairs, src_tok, tgt_tok, max_len=100)
    sampler = TokenBatchSampler(data.lengths, 4096, seed=0)
    batches = [data.collate([data[i] for i in idx]) for idx in itertools.islice(sampler, count)]
    models = {}
    for name, file in RECIPES.items():
        recipe = TranslationRecipe.from_dict(load_recipe(ROOT / "configs" / file))
        torch.manual_seed(0)
        models[name] = recipe.model.build_model(src_vocab_size=src_tok.vocab_size,
                                                tgt_vocab_size=tgt_tok.vocab_size)
    return batches, models


def training_steps(model: nn.Module, batches: list, bf16: bool):
    optimizer = make_optimizer(model, "adam", lr=1e-4)

    def steps() -> None:
        for b in batches:
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext():
                logits = model(b.src, b.tgt_in)
            loss, _ = label_smoothed_cross_entropy(logits, b.tgt_out, epsilon=0.1, ignore_index=0)
            (loss / b.num_tokens).backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()

    return steps


def cell_loop(gru: nn.GRU, x: Tensor, mask: Tensor) -> Tensor:
    """The bi-GRU of ``gru`` stepped through ``nn.GRUCell`` with its weights: ``(B, S, 2e)``."""
    outputs = []
    for suffix, order in (("", range(x.shape[1])), ("_reverse", reversed(range(x.shape[1])))):
        cell = nn.GRUCell(gru.input_size, gru.hidden_size)
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            setattr(cell, name, getattr(gru, f"{name}_l0{suffix}"))
        h, states = x.new_zeros(x.shape[0], gru.hidden_size), [None] * x.shape[1]
        for t in order:
            h = torch.where(mask[:, t, None], cell(x[:, t], h), h)
            states[t] = h * mask[:, t, None]
        outputs.append(torch.stack(states, 1))
    return torch.cat(outputs, -1)


def packed_gru(gru: nn.GRU, x: Tensor, mask: Tensor) -> Tensor:
    """The fused ``gru`` over the real tokens only (packed), as the model runs it: ``(B, S, 2e)``."""
    lengths = mask.sum(dim=1).clamp(min=1).cpu()
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    return pad_packed_sequence(gru(packed)[0], batch_first=True, total_length=x.shape[1])[0]


def encoder_passes(model: nn.Module, batches: list, fused: bool, bf16: bool):
    def run() -> None:
        for b in batches:
            with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext():
                x, mask = model.src_embed(b.src), b.src != 0  # the same input for both
                memory = packed_gru(model.encoder, x, mask) if fused else cell_loop(model.encoder, x, mask)
            memory.float().sum().backward()

    return run


def lm_step(file: str, count: int) -> tuple[nn.Module, object]:
    """The model of recipe ``file`` and a function making one optimizer step on each of
    ``count`` windows batches of its text."""
    recipe = LMRecipe.from_dict(load_recipe(ROOT / "configs" / file))
    corpus = prepare_corpus(recipe.data, None, progress=False)
    torch.manual_seed(0)
    model = recipe.model.build_model(vocab_size=corpus.tokenizer.vocab_size)
    windows = LMDataset(corpus.tokens("train"), recipe.data.block_size, seed=0)
    batches = [windows.get_batch(recipe.data.batch_size) for _ in range(count)]
    o = recipe.optim
    optimizer = make_optimizer(model, "adamw", lr=o.lr, weight_decay=o.weight_decay, betas=tuple(o.betas),
                               decay_embeddings=o.decay_embeddings)

    def steps() -> None:
        for batch in batches:
            optimizer.zero_grad(set_to_none=True)
            loss, tokens = lm_loss(model, batch)
            (loss / tokens).backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()

    return model, steps


def lm_steps(rounds: int, count: int) -> None:
    """(c): the LSTM and the LSTMN of each pair, interleaved; the LSTMN's time over the LSTM's."""
    print("| corpus | model | parameters | ms a step | LSTMN / LSTM |\n|---|---|---:|---:|---:|")
    for corpus, files in LM_PAIRS.items():
        (lstm, lstm_steps), (lstmn, lstmn_steps) = (lm_step(file, count) for file in files)
        times = _timing.time_interleaved({"lstm": lstm_steps, "lstmn": lstmn_steps}, rounds=rounds)
        for name, model in (("lstm", lstm), ("lstmn", lstmn)):
            ratio = f"{_timing.paired_ratio(times['lstmn'], times['lstm']):.2f}" if name == "lstmn" else "1"
            print(f"| {corpus} | {name.upper()} | {model.num_parameters():,} "
                  f"| {1e3 * _timing.median(times[name]) / count:,.1f} | {ratio} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--only", choices=("translators", "lm"), default=None, help="(a) and (b), or (c)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = p.parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            p.error(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    keep_freed_memory()
    _footprint.report_at_exit()
    print(_machine.header(), flush=True)
    if args.only != "translators":
        lm_steps(args.rounds, args.batches)
    if args.only == "lm":
        return 0
    batches, models = batches_and_models(args.batches)
    tokens = sum(int((b.src != 0).sum()) + b.num_tokens for b in batches)
    print(f"{len(batches)} batches, {tokens:,} real tokens (source + target)\n", flush=True)
    fns = {(n, bf16): training_steps(m, batches, bf16) for n, m in models.items() for bf16 in (False, True)}
    times = _timing.time_interleaved({f"{n}|{b}": f for (n, b), f in fns.items()}, rounds=args.rounds)
    base = times["Transformer|False"]
    print("| model | parameters | precision | tokens/s | vs Transformer float32 |\n|---|---:|---|---:|---:|")
    for (name, bf16) in fns:
        t = _timing.median(times[f"{name}|{bf16}"])
        print(f"| {name} | {models[name].num_parameters() / 1e6:.1f} M | {'bf16' if bf16 else 'float32'} "
              f"| {tokens / t:,.0f} | {_timing.paired_ratio(base, times[f'{name}|{bf16}']):.2f} |")
    bahdanau = models["Bahdanau (additive)"]
    enc = {f"{'fused nn.GRU' if f else 'nn.GRUCell loop'}|{b}": encoder_passes(bahdanau, batches, f, b)
           for f in (True, False) for b in (False, True)}
    enc_times = _timing.time_interleaved(enc, rounds=args.rounds)
    print("\n| bi-GRU encoder, forward + backward | precision | ms for the batches |\n|---|---|---:|")
    for key, samples in enc_times.items():
        name, bf16 = key.split("|")
        precision = "bf16" if bf16 == "True" else "float32"
        print(f"| {name} | {precision} | {1e3 * _timing.median(samples):,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
