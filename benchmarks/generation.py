"""Decoding cost: sampling with vs without the KV cache, beam-5 vs greedy,
greedy decoding vs a minimal preallocated KV cache.

    .venv/bin/python benchmarks/generation.py            # ~6 min on 2 loaded cores
    .venv/bin/python benchmarks/generation.py --quick    # fewer tokens and sentences
    .venv/bin/python benchmarks/generation.py --only c   # one table
    .venv/bin/python benchmarks/generation.py --only b --rounds 5   # beam/greedy

(a) KV cache. A GPT of nanoGPT's CPU size (4 layers, 4 heads, d = 128, vocabulary 65 as
tinyshakespeare's characters) samples 500 new tokens after a 256-token prompt, with
``use_cache=True`` and ``use_cache=False`` (same seed: the tokens are checked identical). Row 1
uses ``block_size = 756``, so all 256 + 500 tokens fit the window: the uncached call re-encodes the
whole 256..755-token prefix at every step, the cached one feeds one token. Row 2 uses
``block_size = 256``, the model's window at context 256: both calls then follow the sliding
window of ``attnlab.generation.state`` (the context restarts at its last 128 tokens whenever
it would pass 256), so the uncached call re-encodes 129..256 tokens a step and the cached one
re-encodes 128 tokens once every 128 steps.

(b) Translation. A random-initialised Transformer (d = 256, 4 heads, 3 + 3 layers, FFN 1024,
shared vocabulary 8,000 — the size of the Multi30k recipes) decodes a batch of 64 sources of
10..20 tokens: greedy vs beam 5 (n_best 1, α = 0.6), both with the KV cache, and greedy
without it. A random model never emits eos, so every sentence runs the full 30 steps and the
ratio is the per-step cost at that length; a trained model stops earlier (beam search once 5
hypotheses end), which changes the absolute times but not the comparison much. The last two rows
are floors: attnlab's ``decode`` alone, 30 cached calls with an argmax on every source's memory
repeated 1 or 5 times — no search, no bookkeeping. Beam 5 scores 5 rows a source, so it cannot
cost less than the second floor (less its first step, which beam search runs on one row a
source), whatever its bookkeeping does.

(c) Greedy decoding of a GPT (10.8 M: d = 384, 6 layers, 6 heads,
vocabulary 65, learned positions, ``block_size`` 272 so the window never slides), prompt 16 +
256 new tokens, batch 1 and 8: attnlab's ``greedy_search`` against :func:`minimal_greedy`, a
minimal plain-PyTorch decoder over the same weights with a preallocated KV cache written in
place. Both must emit the same tokens; the ratio (target ≥ 1.0×) is the median of per-round
ratios of the minimal's time to attnlab's, so it reads as attnlab's speed relative to the
minimal's.

(d) Greedy decoding of (b)'s Transformer, batches of 1, 8 and 64 of (b)'s sources, 30
steps: attnlab's ``greedy_search`` against :func:`minimal_translate`, the same weights decoded in
plain PyTorch (source encoded once, self-attention keys/values preallocated and written in place,
cross-attention keys/values projected once). Same tokens checked, ratio read as in (c); and beam
5's cost against attnlab's greedy at each batch size.

Times are medians of interleaved rounds (``attnlab.measure.timing``); the ratio is the median of the
per-round ratios. Other jobs share the 2 cores, so single times are noisy; the ratios less so.
One torch thread by default: on 2 cores that other processes keep busy, a 2-thread OpenMP
region waits at every barrier for the preempted core, and a cached decoding step (many small
ops) measured 10× slower with 2 threads than with 1.
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attnlab.generation import beam_search, greedy_search, sample  # noqa: E402
from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402
from attnlab.measure import timing as _timing  # noqa: E402
from attnlab.models import GPT, GPTConfig, Transformer, TransformerConfig  # noqa: E402

BOS, EOS = 1, 2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="100 new tokens, 16 sentences, 2 rounds")
    p.add_argument("--rounds", type=int, help="interleaved rounds (default 3; quick 2)")
    p.add_argument("--context", type=int, default=256, help="prompt length for (a)")
    p.add_argument("--new-tokens", type=int, help="tokens sampled in (a) (default 500)")
    p.add_argument("--sentences", type=int, help="batch of sources in (b) (default 64)")
    p.add_argument("--max-len", type=int, default=30, help="decoding steps in (b)")
    p.add_argument("--gpt-tokens", type=int, help="new tokens in (c) (default 256; quick 64)")
    p.add_argument("--only", choices=("a", "b", "c", "d"), help="run one table")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: see doc)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="(c) and (d): the models' precision, the reference's too")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="time calls by wall clock or by this thread's CPU time (one thread only)")
    args = p.parse_args(argv)
    args.rounds = args.rounds or (2 if args.quick else 3)
    args.new_tokens = args.new_tokens or (100 if args.quick else 500)
    args.sentences = args.sentences or (16 if args.quick else 64)
    args.gpt_tokens = args.gpt_tokens or (64 if args.quick else 256)
    return args


def print_table(title: str, header: list[str], rows: list[list[object]]) -> None:
    print(f"\n{title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(str(x) for x in row) + " |")


def timed(fns: dict[str, Callable[[], object]], args: argparse.Namespace) -> dict[str, list[float]]:
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    return _timing.time_interleaved(fns, rounds=args.rounds, warmup=1, min_sample_s=0.0, clock=clock)


def cache_table(args: argparse.Namespace) -> None:
    rows = []
    for block_size in (args.context + args.new_tokens, args.context):
        torch.manual_seed(0)
        config = GPTConfig(vocab_size=65, block_size=block_size, d_model=128, num_heads=4,
                           num_layers=4, dropout=0.0)
        model = GPT(config).eval()
        prompt = torch.randint(0, 65, (1, args.context))

        def run(use_cache: bool, model: GPT = model, prompt: torch.Tensor = prompt) -> list:
            return sample(model, prompt, args.new_tokens, seed=0, use_cache=use_cache)
        if run(True) != run(False):
            raise SystemExit(f"block_size={block_size}: cached and uncached sampling differ")
        times = timed({"cache": lambda: run(True), "no cache": lambda: run(False)}, args)
        rows.append([
            block_size, "no" if block_size >= args.context + args.new_tokens else "yes (keep 128)",
            f"{_timing.median(times['cache']):.2f}", f"{_timing.median(times['no cache']):.2f}",
            f"{args.new_tokens / _timing.median(times['cache']):.0f}",
            f"**{_timing.paired_ratio(times['no cache'], times['cache']):.1f}×**", "yes",
        ])
    print_table(
        f"(a) sampling {args.new_tokens} new tokens after a {args.context}-token prompt, GPT "
        "4 layers × 4 heads × 128 (target: speed-up ≥ 5×)",
        ["block_size", "window slides", "cache s", "no cache s", "cached tokens/s",
         "speed-up", "same tokens"], rows)


def minimal_greedy(model: GPT, prompt: torch.Tensor, new_tokens: int) -> list[list[int]]:
    """The reference: greedy decoding of ``model``'s weights in plain PyTorch.

    Pre-LN GPT with learned positions, GELU and a tied head, as ``nn.TransformerEncoderLayer``
    code would run it: per-layer key/value buffers ``(B, H, T_max, d_h)`` allocated once and
    written in place, ``F.scaled_dot_product_attention`` over the filled prefix, one
    ``argmax`` a step; no argument checks, no window, no eos. Returns the new ids of each row.
    """
    c, (b, n) = model.config, prompt.shape
    h, d_h, t_max = c.num_heads, c.d_model // c.num_heads, n + new_tokens
    layers = [(layer.norm1, layer.self_attn, layer.norm2, layer.ffn) for layer in model.decoder.layers]
    kv = torch.empty(len(layers), 2, b, h, t_max, d_h, dtype=model.tok_embed.weight.dtype)
    pos, final = model.pos.absolute.embedding.weight, model.decoder.norm

    def norm(ln: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (c.d_model,), ln.weight, ln.bias, ln.eps)

    def step(ids: torch.Tensor, at: int) -> torch.Tensor:  # ids (B, m) at positions at.. → (B, V)
        m = ids.shape[1]
        x = model.tok_embed.weight[ids] + pos[at : at + m]  # (B, m, d)
        for i, (ln1, attn, ln2, ffn) in enumerate(layers):
            qkv = F.linear(norm(ln1, x), attn.in_proj.weight, attn.in_proj.bias)  # (B, m, 3d)
            q, k, v = qkv.view(b, m, 3, h, d_h).permute(2, 0, 3, 1, 4)  # 3 × (B, H, m, d_h)
            kv[i, 0, :, :, at : at + m], kv[i, 1, :, :, at : at + m] = k, v
            y = F.scaled_dot_product_attention(
                q, kv[i, 0, :, :, : at + m], kv[i, 1, :, :, : at + m], is_causal=m > 1)
            x = x + F.linear(y.transpose(1, 2).reshape(b, m, c.d_model), attn.out_proj.weight,
                             attn.out_proj.bias)
            hid = F.gelu(F.linear(norm(ln2, x), ffn.w1.weight, ffn.w1.bias))
            x = x + F.linear(hid, ffn.w2.weight, ffn.w2.bias)
        return F.linear(norm(final, x[:, -1]), model.head.weight)  # (B, V)

    out = torch.empty(b, new_tokens, dtype=torch.long)
    with torch.no_grad():
        token = step(prompt, 0).argmax(-1)  # (B,)
        for t in range(new_tokens):
            out[:, t] = token
            if t + 1 < new_tokens:
                token = step(token[:, None], n + t).argmax(-1)
    return out.tolist()


def minimal_table(args: argparse.Namespace) -> None:
    """attnlab's ``greedy_search`` vs :func:`minimal_greedy` on (c)'s GPT (10.8 M)."""
    n, new = 16, args.gpt_tokens
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=65, block_size=n + new, d_model=384, num_heads=6, num_layers=6,
                       dropout=0.0)
    model = GPT(config).eval().to(getattr(torch, args.dtype))
    rows = []
    for batch in (1, 8):
        prompt = torch.randint(0, 65, (batch, n))
        fns = {"minimal": lambda p=prompt: minimal_greedy(model, p, new),
               "attnlab": lambda p=prompt: greedy_search(model, prompt=p, max_new_tokens=new)}
        if fns["minimal"]() != fns["attnlab"]():
            raise SystemExit(f"batch {batch}: attnlab greedy_search and the minimal reference differ")
        times = timed(fns, args)
        rows.append([batch] + [f"{batch * new / _timing.median(times[k]):.0f}" for k in fns] + [
            f"**{_timing.paired_ratio(times['minimal'], times['attnlab']):.2f}×**", "yes"])
    print_table(
        f"(c) greedy decoding, GPT 10.8 M (d 384, 6 layers, 6 heads, vocabulary 65), prompt {n} + "
        f"{new} new, vs a minimal preallocated KV cache (target: ≥ 1.0×)",
        ["batch", "minimal tok/s", "attnlab tok/s", "attnlab speed / minimal", "same tokens"], rows)


def translation_model() -> Transformer:
    """(b) and (d)'s model: a random Transformer of the Multi30k recipes' size (seed 0)."""
    torch.manual_seed(0)
    config = TransformerConfig(src_vocab_size=8000, d_model=256, num_heads=4,
                               num_encoder_layers=3, num_decoder_layers=3, d_ff=1024,
                               dropout=0.0, share_embeddings=True)
    return Transformer(config).eval()


def translation_sources(n: int) -> torch.Tensor:
    """``n`` random sources of 10..20 tokens, right-padded with 0: ids ``(n, S)``."""
    lengths = torch.randint(10, 21, (n,))
    src = torch.zeros(n, int(lengths.max()), dtype=torch.long)  # pad 0
    for i, length in enumerate(lengths.tolist()):
        src[i, :length] = torch.randint(3, 8000, (length,))
    return src


def decoder_calls(model: Transformer, src: torch.Tensor, rows_per_source: int, steps: int) -> None:
    """A decoding floor: attnlab's ``decode`` alone, ``steps`` cached calls (checked once, as the
    decoding states do) on each source's memory repeated ``rows_per_source`` times, one argmax
    a step; no search, no bookkeeping."""
    with torch.inference_mode():
        memory, mask = model.encode(src)  # (B, S, d), (B, S)
        memory = memory.repeat_interleave(rows_per_source, 0)  # (B·rows, S, d)
        mask = mask.repeat_interleave(rows_per_source, 0)  # (B·rows, S)
        cache, token = model.new_cache(), torch.full((memory.shape[0], 1), BOS)
        token = model.decode(token, memory, mask, cache=cache)[:, -1].argmax(-1, keepdim=True)
        for _ in range(steps - 1):
            logits = model.decode(token, memory, mask, cache=cache, check=False)  # (B, 1, V)
            token = logits[:, -1].argmax(-1, keepdim=True)


def translation_table(args: argparse.Namespace) -> None:
    model = translation_model()
    src = translation_sources(args.sentences)
    common = dict(max_new_tokens=args.max_len, bos_id=BOS, eos_id=EOS)
    fns = {
        "greedy": lambda: greedy_search(model, src, **common),
        "beam 5": lambda: beam_search(model, src, beam_size=5, **common),
        "greedy, no cache": lambda: greedy_search(model, src, use_cache=False, **common),
        "floor: decode calls, 1 row a source": lambda: decoder_calls(model, src, 1, args.max_len),
        "floor: decode calls, 5 rows a source": lambda: decoder_calls(model, src, 5, args.max_len),
    }
    times = timed(fns, args)
    base = times["greedy"]
    rows = [[name, f"{_timing.median(t):.2f}",
             f"{args.sentences / _timing.median(t):.1f}",
             f"**{_timing.paired_ratio(t, base):.2f}×**"] for name, t in times.items()]
    print_table(
        f"(b) translation decoding, {args.sentences} sources of 10-20 tokens, "
        f"{args.max_len} steps each (random Transformer 3+3 × 256, vocabulary 8000)",
        ["decoder", "s per batch", "sentences/s", "cost vs greedy"], rows)


def minimal_translate(model: Transformer, src: torch.Tensor, steps: int) -> list[list[int]]:
    """The reference for (d): greedy decoding of ``model``'s weights in plain PyTorch.

    The post-LN Transformer of (b) (``norm_first=False``, ReLU, sinusoidal positions, embeddings
    × √d, shared embeddings tied to the head) as ``nn.Transformer`` code would run it: the source
    encoded once (padding masked as keys); per decoder layer, self-attention key/value buffers
    ``(B, H, steps, d_h)`` allocated once and written in place and cross-attention keys/values
    projected once; ``F.scaled_dot_product_attention``; one ``argmax`` a step, pad and bos never
    chosen (attnlab never emits them); no checks, no eos. Returns the new ids of each row.
    """
    c, (b, s) = model.config, src.shape
    d, h, scale = c.d_model, c.num_heads, math.sqrt(c.d_model)
    d_h, embed, blocked = d // h, model.tgt_embed.weight, torch.tensor([c.pad_id, BOS])

    def heads(t: torch.Tensor) -> torch.Tensor:  # (B, n, d) → (B, H, n, d_h)
        return t.view(b, -1, h, d_h).transpose(1, 2)

    def attend(attn: torch.nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               mask: torch.Tensor | None = None) -> torch.Tensor:  # heads → (B, n, d), projected
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(b, -1, d)
        return F.linear(y, attn.out_proj.weight, attn.out_proj.bias)

    def ffn(f: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return F.linear(F.relu(F.linear(x, f.w1.weight, f.w1.bias)), f.w2.weight, f.w2.bias)

    def add_norm(ln: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x + y, (d,), ln.weight, ln.bias, ln.eps)  # post-LN: Norm(x + f(x))

    with torch.inference_mode():
        mask = (src != c.pad_id)[:, None, None, :] if bool((src == c.pad_id).any()) else None
        x = model.src_embed.weight[src] * scale + model.src_pos.absolute.pe[:s]  # (B, S, d)
        for layer in model.encoder.layers:
            a = layer.self_attn
            q, k, v = F.linear(x, a.in_proj.weight, a.in_proj.bias).split(d, dim=-1)
            x = add_norm(layer.norm1, x, attend(a, heads(q), heads(k), heads(v), mask))
            x = add_norm(layer.norm2, x, ffn(layer.ffn, x))  # memory (B, S, d)
        layers, pos = [], model.tgt_pos.absolute.pe
        for layer in model.decoder.layers:  # cross-attention keys/values projected once
            w, bias = layer.cross_attn.in_proj.weight, layer.cross_attn.in_proj.bias
            k, v = F.linear(x, w[d:], bias[d:]).split(d, dim=-1)
            layers.append((layer, w[:d], bias[:d], heads(k), heads(v)))
        kv = torch.empty(len(layers), 2, b, h, steps, d_h, dtype=embed.dtype)
        token, out = torch.full((b,), BOS), torch.empty(b, steps, dtype=torch.long)
        for t in range(steps):
            y = embed[token][:, None] * scale + pos[t]  # (B, 1, d)
            for i, (layer, w_q, b_q, k_cross, v_cross) in enumerate(layers):
                a = layer.self_attn
                qkv = F.linear(y, a.in_proj.weight, a.in_proj.bias).view(b, 1, 3, h, d_h)
                q, k, v = qkv.permute(2, 0, 3, 1, 4)  # 3 × (B, H, 1, d_h)
                kv[i, 0, :, :, t : t + 1], kv[i, 1, :, :, t : t + 1] = k, v
                y = add_norm(layer.norm1, y, attend(a, q, kv[i, 0, :, :, : t + 1], kv[i, 1, :, :, : t + 1]))
                q = heads(F.linear(y, w_q, b_q))
                y = add_norm(layer.norm2, y, attend(layer.cross_attn, q, k_cross, v_cross, mask))
                y = add_norm(layer.norm3, y, ffn(layer.ffn, y))
            logits = F.linear(y[:, 0], model.output.weight)  # (B, V)
            token = logits.index_fill_(-1, blocked, float("-inf")).argmax(-1)  # (B,)
            out[:, t] = token
    return out.tolist()


def minimal_translation_table(args: argparse.Namespace) -> None:
    """attnlab's ``greedy_search`` (and beam 5) vs :func:`minimal_translate` on (b)'s model."""
    model, steps = translation_model().to(getattr(torch, args.dtype)), args.max_len
    c = model.config
    if c.norm_first or c.activation != "relu" or c.positional != "sinusoidal" or not c.tie_output:
        raise SystemExit("minimal_translate implements the post-LN, ReLU, sinusoidal, tied Transformer")
    sources, common = translation_sources(64), dict(max_new_tokens=steps, bos_id=BOS, eos_id=EOS)
    rows = []
    for batch in (1, 8) if args.quick else (1, 8, 64):
        src = sources[:batch]
        src = src[:, : int((src != c.pad_id).sum(1).max())]  # as a batch of its own: no extra pad
        fns = {"minimal": lambda s=src: minimal_translate(model, s, steps),
               "greedy": lambda s=src: greedy_search(model, s, **common),
               "beam 5": lambda s=src: beam_search(model, s, beam_size=5, **common)}
        if fns["minimal"]() != fns["greedy"]():
            raise SystemExit(f"batch {batch}: attnlab greedy_search and the minimal reference differ")
        times = timed(fns, args)
        rows.append([batch] + [f"{batch * steps / _timing.median(times[k]):.0f}" for k in fns] + [
            f"**{_timing.paired_ratio(times['minimal'], times['greedy']):.2f}×**", "yes",
            f"**{_timing.paired_ratio(times['beam 5'], times['greedy']):.2f}×**"])
    print_table(
        f"(d) translation greedy decoding, (b)'s Transformer, {steps} steps, vs a minimal "
        "preallocated KV cache (target: ≥ 1.0×); beam 5's cost vs greedy",
        ["batch", "minimal tok/s", "greedy tok/s", "beam 5 tok/s", "greedy speed / minimal",
         "same tokens", "beam 5 cost / greedy"], rows)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    _footprint.report_at_exit()
    print(_machine.header() + "\n", flush=True)
    print(f"# attnlab generation benchmark{' (quick)' if args.quick else ''}\n")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{torch.backends.cpu.get_cpu_capability()}, {platform.machine()}, "
          f"{args.rounds} interleaved rounds after 1 warm-up call, {args.clock} clock; "
          f"float32 ((c), (d): {args.dtype}), eval, no grad")
    start = time.perf_counter()
    tables = (("a", cache_table), ("b", translation_table), ("c", minimal_table),
              ("d", minimal_translation_table))
    for name, table in tables:
        if args.only in (None, name):
            table(args)
    print(f"\n(total {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
