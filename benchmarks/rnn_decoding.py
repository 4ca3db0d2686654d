"""Greedy decoding of the RNN translators against a minimal plain-PyTorch decoder.

    .venv/bin/python benchmarks/rnn_decoding.py --rounds 5          # ~1.5 min on 2 loaded cores
    .venv/bin/python benchmarks/rnn_decoding.py --quick             # 2 rounds, batches 1 and 8
    .venv/bin/python benchmarks/rnn_decoding.py --profile bahdanau  # where a decode step goes

The models are random-initialised at the sizes of their recipes (the ``[model]`` tables of
``configs/multi30k_rnn.toml`` and ``configs/multi30k_bahdanau.toml``, one joint vocabulary of
8,000): Cho et al.'s GRU encoder-decoder with one context vector (``RNNSeq2Seq``, GRU 512 over
embeddings of 256) and Bahdanau et al.'s bi-GRU encoder with additive attention
(``AttentionSeq2Seq``, 2 × 256 encoder, decoder 512, alignment network 256). Sources are
10-20 random tokens, right-padded; every row decodes 30 steps (a random model never emits eos,
checked), pad and bos blocked as ``greedy_search`` blocks them.

(a) attnlab's ``greedy_search(model, src, max_new_tokens=30, bos_id=1, eos_id=2)`` (encode once,
then ``decode`` one token a step with the model's cache) against :func:`minimal_greedy_rnn`: the
same weights in plain PyTorch, as one would write the loop by hand — the same packed ``nn.GRU``
encoder call, then per step: embedding lookup → (Bahdanau: additive score over the key
projection ``W_k h_j`` computed once per sentence, masked softmax, context) →
``torch.gru_cell`` → deep output → output layer → argmax into a preallocated output; no
argument checks, no modules, no eos handling. attnlab's caches keep more than the minimal does
(models/rnn.py, models/attention_seq2seq.py): Cho's products of the weights with the context
vector ``c``, and, while batch × source length ≤ 512, Bahdanau's annotations projected by the
weights that read ``c_i``; the minimal recomputes those each step. Both must emit identical tokens (the script
exits non-zero otherwise). tok/s counts generated tokens (batch × 30) over the whole call, encoder
included. The ratio (target ≥ 1.0×) is the median of per-round ratios of the minimal's time to
attnlab's: attnlab's speed relative to the minimal's.

(b) Beam 5 (n_best 1, α = 1.0 as the recipes) against greedy, both attnlab, all 30 steps.

Times are medians of interleaved rounds (``attnlab.measure.timing``; each sample lasts at least
0.3 s). Other jobs share the 2 cores, so single times are noisy; the paired ratios less so. One
torch thread by default (a decoding step is many small ops: see benchmarks/generation.py).
``--clock cpu`` times each call by this thread's CPU time instead (``time.thread_time``, one
call a sample, the same interleaving): on cores that other processes keep busy, wall time also
counts the waits for a core, which swung a 5-round ratio here by ±20 %; use it with many rounds
(``--clock cpu --rounds 30``).
"""

from __future__ import annotations

import argparse
import cProfile
import platform
import pstats
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnlab.config import load_toml
from attnlab.generation import beam_search, greedy_search
from attnlab.labs.report import markdown_table
from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine
from attnlab.measure import timing as _timing
from attnlab.models import AttentionSeq2Seq, RNNSeq2Seq

ROOT = Path(__file__).resolve().parents[1]
BOS, EOS, VOCAB, STEPS = 1, 2, 8000, 30
MODELS = {"cho": (RNNSeq2Seq, "multi30k_rnn.toml"), "bahdanau": (AttentionSeq2Seq, "multi30k_bahdanau.toml")}
TITLES = {"cho": "Cho et al. (GRU 512, one context vector)",
          "bahdanau": "Bahdanau et al. (bi-GRU 2 × 256, additive attention 256, GRU 512)"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="2 rounds, batches 1 and 8, no beam at 64")
    p.add_argument("--rounds", type=int, help="interleaved rounds (default 3; quick 2)")
    p.add_argument("--only", choices=("a", "b"), help="run one table")
    p.add_argument("--models", nargs="+", choices=tuple(MODELS), default=list(MODELS))
    p.add_argument("--profile", choices=tuple(MODELS), help="profile attnlab's greedy decoding instead")
    p.add_argument("--batch", type=int, default=1, help="batch of --profile")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall: perf_counter, samples >= 0.3 s; cpu: thread CPU time, one call a sample")
    args = p.parse_args(argv)
    args.rounds = args.rounds or (2 if args.quick else 3)
    args.batches = (1, 8) if args.quick else (1, 8, 64)
    return args


def build(name: str) -> RNNSeq2Seq | AttentionSeq2Seq:
    """The recipe's model, random-initialised (seed 0), in eval mode."""
    cls, recipe = MODELS[name]
    table = load_toml(ROOT / "configs" / recipe)["model"]
    fields = {k: v for k, v in table.items() if k != "type"}
    torch.manual_seed(0)
    return cls(cls.config_class(src_vocab_size=VOCAB, **fields)).eval()


def sources(batch: int, seed: int) -> Tensor:
    """``batch`` random sources of 10-20 tokens, right-padded with 0: ``(B, S)``."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(10, 21, (batch,), generator=g)
    src = torch.zeros(batch, int(lengths.max()), dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        src[i, :n] = torch.randint(3, VOCAB, (n,), generator=g)
    return src


def encode_packed(model, src: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The encoder's one packed ``nn.GRU`` call: ``(outputs (B, S, ·), last, mask (B, S))``."""
    mask = src != model.config.pad_id
    lengths = mask.sum(dim=1).clamp(min=1).cpu()
    packed = pack_padded_sequence(F.embedding(src, model.src_embed.weight), lengths,
                                  batch_first=True, enforce_sorted=False)
    outputs, last = model.encoder(packed)
    return pad_packed_sequence(outputs, batch_first=True, total_length=src.shape[1])[0], last, mask


def minimal_greedy_rnn(model, src: Tensor, steps: int) -> list[list[int]]:
    """The reference: greedy decoding of ``model``'s weights in plain PyTorch (module doc (a)).

    Cho: ``c = tanh(V h_S)``, ``s_0 = tanh(V' c)``; Bahdanau: ``s_0 = tanh(W_s h←_1)`` and the
    keys ``W_k h_j`` once. Each step: ``y = E[token]``, (``α = softmax(w_vᵀ tanh(W_k h_j + W_q
    s))`` over the real tokens, ``c = Σ α_j h_j``), ``s = GRU([y; c], s)``, logits ``E_out
    tanh(W_o [s; c; y])`` with pad and bos blocked, argmax. Returns the ids of each row."""
    cfg, batch = model.config, src.shape[0]
    embed, out_w = model.tgt_embed.weight, model.output.weight
    deep_w, deep_b = model.deep_output.weight, model.deep_output.bias
    blocked = torch.tensor([cfg.pad_id, BOS])
    out = torch.empty(batch, steps, dtype=torch.long)
    with torch.no_grad():
        memory, last, mask = encode_packed(model, src)
        if isinstance(model, AttentionSeq2Seq):
            score, cell = model.alignment.score, model.cell
            gru = (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
            s = torch.tanh(F.linear(memory[:, 0, cfg.encoder_dim :], model.bridge.weight, model.bridge.bias))
            keys, w_q, w_v = F.linear(memory, score.w_k.weight), score.w_q.weight, score.w_v.weight
            padding = ~mask  # (B, S)
        else:
            g = model.cell
            gru = (g.weight_ih, g.weight_hh, g.bias_ih, g.bias_hh)
            c = torch.tanh(F.linear(last[-1], model.context.weight, model.context.bias))  # (B, H)
            s = torch.tanh(F.linear(c, model.bridge.weight, model.bridge.bias))  # (B, H)
        token = torch.full((batch,), BOS, dtype=torch.long)
        for t in range(steps):
            y = embed[token]  # (B, E)
            if isinstance(model, AttentionSeq2Seq):
                e = F.linear(torch.tanh(keys + F.linear(s, w_q).unsqueeze(1)), w_v).squeeze(-1)
                alpha = torch.softmax(e.masked_fill(padding, float("-inf")), dim=-1)  # (B, S)
                c = torch.bmm(alpha.unsqueeze(1), memory).squeeze(1)  # (B, 2e)
            s = torch.gru_cell(torch.cat([y, c], dim=1), s, *gru)  # (B, H)
            logits = F.linear(torch.tanh(F.linear(torch.cat([s, c, y], dim=1), deep_w, deep_b)), out_w)
            token = logits.index_fill_(1, blocked, float("-inf")).argmax(dim=-1)  # (B,)
            out[:, t] = token
    return out.tolist()


def print_table(title: str, header: list[str], rows: list[list[object]]) -> None:
    print(f"\n{title}\n\n{markdown_table(header, rows)}", flush=True)


def timed(fns: dict[str, Callable[[], object]], rounds: int, clock: str) -> dict[str, list[float]]:
    """Seconds per call of each candidate, ``rounds`` interleaved samples each (module doc)."""
    if clock == "wall":
        return _timing.time_interleaved(fns, rounds=rounds, warmup=1, min_sample_s=0.3)
    return _timing.time_interleaved(fns, rounds=rounds, warmup=1, min_sample_s=0.0,
                                    clock=time.thread_time)  # one call a sample


def greedy(model, src: Tensor) -> list[list[int]]:
    return greedy_search(model, src, max_new_tokens=STEPS, bos_id=BOS, eos_id=EOS)


def minimal_row(model, name: str, batch: int, rounds: int, clock: str) -> list[object]:
    """One row of table (a): both decoders checked token for token, then timed interleaved."""
    src = sources(batch, seed=batch)
    ours, ref = greedy(model, src), minimal_greedy_rnn(model, src, STEPS)
    if any(len(row) != STEPS for row in ours):
        raise SystemExit(f"{name}, batch {batch}: a row emitted eos; pick other sources")
    if ours != ref:
        raise SystemExit(f"{name}, batch {batch}: attnlab greedy_search and the minimal differ")
    times = timed({"minimal": lambda: minimal_greedy_rnn(model, src, STEPS),
                   "attnlab": lambda: greedy(model, src)}, rounds, clock)
    speeds = [f"{batch * STEPS / _timing.median(times[k]):,.0f}" for k in ("minimal", "attnlab")]
    return [batch, *speeds, f"**{_timing.paired_ratio(times['minimal'], times['attnlab']):.2f}×**", "yes"]


def minimal_table(args: argparse.Namespace, name: str) -> None:
    model = build(name)
    rows = [minimal_row(model, name, batch, args.rounds, args.clock) for batch in args.batches]
    print_table(
        f"(a) greedy decoding, {TITLES[name]}, vocabulary {VOCAB}, {STEPS} steps, vs a minimal "
        "plain-PyTorch decoder (target: ≥ 1.0×)",
        ["batch", "minimal tok/s", "attnlab tok/s", "attnlab speed / minimal", "same tokens"], rows)


def beam_table(args: argparse.Namespace) -> None:
    rows = []
    for name in args.models:
        model = build(name)
        for batch in args.batches[:: len(args.batches) - 1]:  # the smallest and the largest
            src = sources(batch, seed=batch)
            fns = {"greedy": lambda m=model, s=src: greedy(m, s),
                   "beam 5": lambda m=model, s=src: beam_search(m, s, beam_size=5, max_new_tokens=STEPS,
                                                                bos_id=BOS, eos_id=EOS, length_penalty=1.0)}
            times = timed(fns, args.rounds, args.clock)
            rows.append([name, batch] + [f"{_timing.median(times[k]) * 1e3:.1f}" for k in fns] + [
                f"**{_timing.paired_ratio(times['beam 5'], times['greedy']):.2f}×**"])
    print_table(f"(b) beam 5 vs greedy (attnlab), sources of 10-20 tokens, {STEPS} steps",
                ["model", "batch", "greedy ms", "beam 5 ms", "beam cost vs greedy"], rows)


def profile(args: argparse.Namespace) -> None:
    """cProfile's and torch.profiler's top items over 20 greedy calls of ``--batch`` sources."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    model, src = build(args.profile), sources(args.batch, seed=args.batch)
    greedy(model, src)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(20):
        greedy(model, src)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(20):
            greedy(model, src)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.profile:
        profile(args)
        return
    _footprint.report_at_exit()
    print(_machine.header() + "\n", flush=True)
    print(f"# attnlab RNN decoding benchmark{' (quick)' if args.quick else ''}\n")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.machine()}, "
          f"{args.rounds} interleaved rounds after 1 warm-up call, {args.clock} clock; "
          "float32, eval, no grad")
    start = time.perf_counter()
    if args.only in (None, "a"):
        for name in args.models:
            minimal_table(args, name)
    if args.only in (None, "b"):
        beam_table(args)
    print(f"\n(total {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
