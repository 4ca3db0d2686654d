"""Where the explicit bf16 attention path stops beating PyTorch's fused CPU kernel.

    .venv/bin/python benchmarks/attention_threshold.py              # ~3 min on 2 cores
    .venv/bin/python benchmarks/attention_threshold.py --threads 1 --rounds 9

``attnlab.attention.kernels`` takes the explicit path — ``softmax(QKᵀ/√d_k + M) V`` written out,
the softmax in float32 — for bfloat16 / float16 on the CPU up to ``EXPLICIT_MAX_KEYS_TRAIN``
keys with gradients and ``EXPLICIT_MAX_KEYS_INFER`` without, because PyTorch's flash kernel is
slower there. Those two numbers were measured on one CPU family; this script re-measures the
crossover on the machine it runs on, so that another family (Intel with AMX, say) can be
checked against them. The path is a constant rather than a timing probe at run time on
purpose: a path chosen by timing would make a recipe's numbers depend on how busy the machine
was.

Shapes: a fixed budget of ``--tokens`` query positions (B = tokens / n), 4 heads of 64, causal
(the GPT case) for n = 16 .. 1024:

* ``train``: forward + backward of q, k, v (bf16, no autocast needed: the inputs are bf16);

q, k and v are views of one packed ``(B, n, 3, H, d_h)`` tensor, as ``MultiHeadAttention``'s
single QKV matmul leaves them (not contiguous per head: the fused kernel's backward pays for
that, and isolated contiguous inputs would favour it);
* ``infer``: forward under ``torch.inference_mode`` (evaluation, the prompt of a generation);
* ``step``: one query against n keys (a cached decoding step), B·4 heads;
* ``step, 1 row``: the same for a single row (batch 1 decoding), where the kernel's cost,
  which grows with rows × heads × keys, can undercut the explicit path's fixed cost.

Ratio = fused time / explicit time (median of interleaved per-round ratios); > 1 means the
explicit path is faster. The last column says which path ``kernels`` takes at that n.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attnlab.attention import core, kernels  # noqa: E402
from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402
from attnlab.measure import timing as _timing  # noqa: E402

HEADS, D_HEAD = 4, 64


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128, 256, 512, 1024])
    p.add_argument("--tokens", type=int, default=4096, help="query positions per call (B·n)")
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds per case")
    p.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's choice)")
    p.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    return p.parse_args(argv)


def explicit(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    scale = D_HEAD**-0.5
    if causal:
        return kernels._causal_in_place(q, k, v, 0.0, scale)
    return core.explicit_attention(q, k, v, None, is_causal=False, dropout=0.0, scale=scale)[0]


def fused(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def case(mode: str, n: int, args: argparse.Namespace) -> dict[str, Callable[[], object]]:
    """The two paths on one shape, as zero-argument calls (checked equal first)."""
    dtype = getattr(torch, args.dtype)
    batch = 1 if mode == "step, 1 row" else max(1, args.tokens // n)
    n_q = 1 if mode.startswith("step") else n
    g = torch.Generator().manual_seed(n)
    packed = torch.randn(batch, n, 3, HEADS, D_HEAD, generator=g).to(dtype)  # one qkv matmul's output
    q, k, v = packed.permute(2, 0, 3, 1, 4).unbind(0)  # 3 × (B, H, n, d_h) views, as in the model
    q = q[..., -n_q:, :]
    causal = n_q > 1  # one query, the last: it sees every key
    calls = {}
    for name, path in (("explicit", explicit), ("fused", fused)):
        if mode == "train":
            leaf = packed.detach().requires_grad_()

            def call(path=path, leaf=leaf) -> object:
                views = leaf.permute(2, 0, 3, 1, 4).unbind(0)
                return torch.autograd.grad(path(*views, causal).float().sum(), leaf)
        else:
            def call(path=path) -> object:
                with torch.inference_mode():
                    return path(q, k, v, causal)
        calls[name] = call
    with torch.inference_mode():
        torch.testing.assert_close(explicit(q, k, v, causal), fused(q, k, v, causal), atol=2e-2, rtol=2e-2)
    return calls


def core_takes(mode: str, n: int, tokens: int, dtype: torch.dtype) -> str:
    """The path ``kernels`` picks for this shape (asked, not restated)."""
    train = mode == "train"
    rows = 1 if mode == "step, 1 row" else max(1, tokens // n)
    n_q = 1 if mode.startswith("step") else n
    q = torch.zeros(rows, HEADS, n_q, D_HEAD, dtype=dtype, requires_grad=train)
    k = torch.zeros(rows, HEADS, n, D_HEAD, dtype=dtype, requires_grad=train)
    with torch.set_grad_enabled(train):
        return "explicit" if kernels.explicit_is_faster(q, k) else "fused"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    _footprint.report_at_exit()
    print(_machine.header() + "\n", flush=True)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.dtype}, "
          f"{args.tokens} query positions a call, {HEADS} heads of {D_HEAD}, "
          f"{args.rounds} interleaved rounds; kernels: explicit up to "
          f"{kernels.EXPLICIT_MAX_KEYS_TRAIN} keys with gradients, "
          f"{kernels.EXPLICIT_MAX_KEYS_INFER} without, "
          f"a single query from {kernels.EXPLICIT_MIN_STEP_SCORES} scores (rows × heads × keys)")
    start = time.perf_counter()
    for mode in ("train", "infer", "step", "step, 1 row"):
        print(f"\n({mode})\n\n| n | explicit ms | fused ms | fused / explicit | faster | core takes |")
        print("|---:|---:|---:|---:|---|---|")
        for n in args.lengths:
            calls = case(mode, n, args)
            t = _timing.time_interleaved(calls, rounds=args.rounds, warmup=1, min_sample_s=0.05)
            ratio = _timing.paired_ratio(t["fused"], t["explicit"])
            takes = core_takes(mode, n, args.tokens, getattr(torch, args.dtype))
            print(f"| {n} | {_timing.median(t['explicit']) * 1e3:.2f} | "
                  f"{_timing.median(t['fused']) * 1e3:.2f} | {ratio:.2f} | "
                  f"{'explicit' if ratio > 1 else 'fused'} | {takes} |", flush=True)
    print(f"\n(total {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
