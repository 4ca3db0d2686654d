"""attnlab's attention vs PyTorch's: time ratio and peak memory.

    .venv/bin/python benchmarks/attention.py            # full run (~10 min on 2 cores)
    .venv/bin/python benchmarks/attention.py --quick    # n <= 1024, fewer rounds (~2 min)
    .venv/bin/python benchmarks/attention.py --dtype bfloat16

Shapes: B=4, H=8, d_h=64 (d_model=512). Tables, printed as Markdown:

(a) ``scaled_dot_product_attention`` fused path vs ``F.scaled_dot_product_attention``;
(b) the explicit path (``return_weights=True``) vs softmax(QKᵀ/√d)V written inline in torch;
(c) ``MultiHeadAttention`` vs ``nn.MultiheadAttention`` (same weights, ``need_weights=False``;
    forward in eval mode under ``no_grad``, forward+backward in train mode);
(d) peak memory of the fused path up to n=16384 (linear in n) against the explicit one (n²);
(e) the dropout pitfall: on CPU, dropout > 0 sends the fused call to PyTorch's O(n²) math path.

"ratio" = attnlab time / torch time, the median of per-round ratios of interleaved
measurements (see ``attnlab.measure.timing``); <= 1.0 means attnlab is at least as fast. "fwd" runs under
``torch.no_grad()``; "fwd+bwd" is forward plus ``torch.autograd.grad`` of every input (and
parameter). Memory is the peak RSS increase during one call (see ``attnlab.measure.timing``), in MiB.
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attnlab.attention.core import scaled_dot_product_attention  # noqa: E402
from attnlab.attention.multihead import MultiHeadAttention  # noqa: E402
from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402
from attnlab.measure import timing as _timing  # noqa: E402

B, H, D_HEAD = 4, 8, 64
D_MODEL = H * D_HEAD
Step = Callable[[], object]
Attention = Callable[[Tensor, Tensor, Tensor], Tensor]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="n = 128..1024, 3 rounds")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--sizes", type=int, nargs="+", help="sequence lengths for (a)-(c)")
    p.add_argument("--rounds", type=int, help="interleaved rounds per case (default 7; quick 3)")
    p.add_argument("--explicit-max-n", type=int, help="largest n for (b): each (B,H,n,n) "
                   "float32 tensor takes 2 GiB at n=4096 (default 2048; quick 1024)")
    p.add_argument("--only", default="abcde", help="subset of tables to run, e.g. 'ac'")
    p.add_argument("--budget", type=float, default=60.0, help="seconds of timed rounds per "
                   "case: slow cases get fewer rounds (at least 3)")
    p.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's choice)")
    p.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.sizes = args.sizes or ([128, 256, 512, 1024] if args.quick else
                                [128, 256, 512, 1024, 2048, 4096])
    args.rounds = args.rounds or (3 if args.quick else 7)
    args.explicit_max_n = args.explicit_max_n or (1024 if args.quick else 2048)
    args.dtype = getattr(torch, args.dtype)
    return args


# ---------------------------------------------------------------------------------- steps


def forward_step(f: Callable[[], Tensor | tuple[Tensor, ...]]) -> Step:
    def step() -> object:
        with torch.no_grad():
            return f()
    return step


def backward_step(f: Callable[[], Tensor | tuple[Tensor, ...]], leaves: list[Tensor]) -> Step:
    """Forward, then the gradients of every leaf for a fixed upstream gradient."""
    out0 = f()
    out0 = out0[0] if isinstance(out0, tuple) else out0
    grad_out = torch.randn_like(out0)

    def step() -> object:
        out = f()
        out = out[0] if isinstance(out, tuple) else out
        return torch.autograd.grad(out, leaves, grad_out)
    return step


def padding(n: int) -> Tensor:
    """Key-padding mask ``(B, 1, 1, n)``, True = real token; sequence b has n - b·n/16 tokens."""
    lengths = torch.tensor([n - b * n // 16 for b in range(B)])  # (B,)
    return (torch.arange(n)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, n)


def qkv(n: int, dtype: torch.dtype, grad: bool) -> list[Tensor]:
    return [torch.randn(B, H, n, D_HEAD, dtype=dtype, requires_grad=grad) for _ in range(3)]


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    return {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {"atol": 1e-4, "rtol": 1e-4}


def check_same(name: str, ours: Tensor, theirs: Tensor, dtype: torch.dtype) -> None:
    if not torch.allclose(ours.float(), theirs.float(), **tolerance(dtype)):
        err = (ours.float() - theirs.float()).abs().max().item()
        raise SystemExit(f"{name}: attnlab and torch disagree (max abs error {err:.3g})")


def plain_attention(
    q: Tensor, k: Tensor, v: Tensor, blocked: Tensor | None
) -> tuple[Tensor, Tensor]:
    """softmax(QKᵀ/√d)V as anyone would write it inline, returning the weights too."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, n, n)
    if blocked is not None:
        scores = scores.masked_fill(blocked, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (B, H, n, n)
    return weights @ v, weights  # (B, H, n, d_h), (B, H, n, n)


# ------------------------------------------------------------------------------- the pairs


def sdpa_pair(n: int, masking: str, dtype: torch.dtype, grad: bool) -> tuple:
    """(a): attnlab's fused path vs F.scaled_dot_product_attention."""
    q, k, v = qkv(n, dtype, grad)
    causal = masking == "causal"
    mask = padding(n) if masking == "padding" else None  # F.sdpa's bool mask is True = allowed too

    def ours() -> Tensor:
        return scaled_dot_product_attention(q, k, v, mask, is_causal=causal)

    def theirs() -> Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    return ours, theirs, [q, k, v]


def explicit_pair(n: int, masking: str, dtype: torch.dtype, grad: bool) -> tuple:
    """(b): attnlab's explicit path vs plain torch."""
    q, k, v = qkv(n, dtype, grad)
    causal = masking == "causal"
    blocked = torch.ones(n, n, dtype=torch.bool).triu(1) if causal else None  # (n, n)

    def ours() -> tuple[Tensor, Tensor]:
        return scaled_dot_product_attention(q, k, v, is_causal=causal, return_weights=True)

    def theirs() -> tuple[Tensor, Tensor]:
        return plain_attention(q, k, v, blocked)
    return ours, theirs, [q, k, v]


def mha_pair(n: int, masking: str, dtype: torch.dtype, grad: bool) -> tuple:
    """(c): MultiHeadAttention vs nn.MultiheadAttention with the same weights."""
    causal = masking == "causal"
    torch_mha = nn.MultiheadAttention(D_MODEL, H, batch_first=True, dtype=dtype)
    ours_mha = MultiHeadAttention(D_MODEL, H).to(dtype)
    with torch.no_grad():
        ours_mha.in_proj.weight.copy_(torch_mha.in_proj_weight)
        ours_mha.in_proj.bias.copy_(torch_mha.in_proj_bias)
        ours_mha.out_proj.weight.copy_(torch_mha.out_proj.weight)
        ours_mha.out_proj.bias.copy_(torch_mha.out_proj.bias)
    torch_mha.train(grad)
    ours_mha.train(grad)
    x = torch.randn(B, n, D_MODEL, dtype=dtype, requires_grad=grad)
    # PyTorch's boolean attn_mask is True = blocked.
    blocked = torch.ones(n, n, dtype=torch.bool).triu(1) if causal else None  # (n, n)

    def ours() -> Tensor:
        return ours_mha(x, is_causal=causal)

    def theirs() -> Tensor:
        return torch_mha(x, x, x, attn_mask=blocked, is_causal=causal, need_weights=False)[0]
    leaves = [x, *torch_mha.parameters()]
    ours_leaves = [x, *ours_mha.parameters()]
    return ours, theirs, (ours_leaves, leaves)


# ------------------------------------------------------------------------------- the tables


def compare(pair: Callable, n: int, masking: str, args: argparse.Namespace) -> list:
    """Rows for one (n, masking): forward, then forward+backward."""
    rows = []
    for mode in ("fwd", "fwd+bwd"):
        grad = mode == "fwd+bwd"
        ours, theirs, leaves = pair(n, masking, args.dtype, grad)
        ours_leaves, theirs_leaves = leaves if isinstance(leaves, tuple) else (leaves, leaves)
        if grad:
            steps = {"attnlab": backward_step(ours, ours_leaves),
                     "torch": backward_step(theirs, theirs_leaves)}
        else:
            steps = {"attnlab": forward_step(ours), "torch": forward_step(theirs)}
            a, b = steps["attnlab"](), steps["torch"]()
            check_same(f"{pair.__name__} n={n} {masking}",
                       a[0] if isinstance(a, tuple) else a, b[0] if isinstance(b, tuple) else b,
                       args.dtype)
        times = _timing.time_interleaved(steps, rounds=args.rounds, min_sample_s=0.1,
                                         budget_s=args.budget)
        mem = {name: _timing.peak_memory(step, warm=False) for name, step in steps.items()}
        rows.append([n, masking, mode,
                     f"{_timing.median(times['attnlab']) * 1e3:.2f}",
                     f"{_timing.median(times['torch']) * 1e3:.2f}",
                     f"**{_timing.paired_ratio(times['attnlab'], times['torch']):.3f}**",
                     mib(mem["attnlab"]), mib(mem["torch"]), len(times["torch"])])
    return rows


def mib(nbytes: int) -> str:
    return f"{nbytes / _timing.MiB:.1f}"


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---:" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
    sys.stdout.flush()


HEADER = ["n", "mask", "pass", "attnlab ms", "torch ms", "ratio", "attnlab MiB", "torch MiB",
          "rounds"]


def ratio_table(
    title: str, pair: Callable, sizes: list[int], args: argparse.Namespace,
    maskings: tuple[str, ...] = ("none", "causal"),
) -> None:
    rows = []
    for n in sizes:
        for masking in maskings:
            rows.extend(compare(pair, n, masking, args))
    print_table(title, HEADER, rows)


def memory_table(args: argparse.Namespace) -> None:
    """(d): fused peak memory grows like n, explicit like n² (run in a malloc-pinned process)."""
    rows = []
    for n in [1024, 2048, 4096, 16384]:
        for mode in ("fwd", "fwd+bwd") if not args.quick or n < 16384 else ("fwd",):
            grad = mode == "fwd+bwd"
            q, k, v = qkv(n, args.dtype, grad)
            fused = _step(partial(scaled_dot_product_attention, q, k, v), grad, q, k, v)
            if n < 16384:
                fused()  # warm-up: one-time caches are not the call's memory
            start = time.perf_counter()
            tensor_peak, rss_peak = _timing.peak_memory_both(fused)
            seconds = time.perf_counter() - start
            explicit = "—"
            if n <= args.explicit_max_n:
                ex = partial(scaled_dot_product_attention, q, k, v, return_weights=True)
                explicit = mib(_timing.peak_memory(_step(ex, grad, q, k, v)))
            rows.append([n, mode, mib(tensor_peak), "n/a" if rss_peak is None else mib(rss_peak),
                         f"{tensor_peak / n / 1024:.1f}", explicit, f"{seconds:.1f}"])
            del q, k, v, fused
    print_table("(d) peak memory of the fused path (linear in n) vs the explicit path (n²),"
                " non-causal", ["n", "pass", "fused MiB", "fused MiB (RSS)", "fused KiB/token",
                               "explicit MiB", "s (1 call)"], rows)


def _step(f: Callable[[], Tensor | tuple[Tensor, ...]], grad: bool, *leaves: Tensor) -> Step:
    return backward_step(f, list(leaves)) if grad else forward_step(f)


def dropout_table(args: argparse.Namespace) -> None:
    """(e): the fused call with dropout 0.1 (training) against dropout 0."""
    rows = []
    for n in [512, 1024] if args.quick else [512, 1024, 2048]:
        q, k, v = qkv(n, args.dtype, True)
        steps = {
            "p=0.1": backward_step(partial(scaled_dot_product_attention, q, k, v, dropout=0.1),
                                   [q, k, v]),
            "p=0": backward_step(partial(scaled_dot_product_attention, q, k, v), [q, k, v]),
        }
        times = _timing.time_interleaved(steps, rounds=args.rounds, min_sample_s=0.1,
                                         budget_s=args.budget)
        mem = {name: _timing.peak_memory(s, warm=False) for name, s in steps.items()}
        rows.append([n, f"{_timing.median(times['p=0.1']) * 1e3:.1f}",
                     f"{_timing.median(times['p=0']) * 1e3:.1f}",
                     f"**{_timing.paired_ratio(times['p=0.1'], times['p=0']):.2f}**",
                     mib(mem["p=0.1"]), mib(mem["p=0"]), len(times["p=0"])])
    print_table("(e) dropout disables the fused kernel on CPU (fused path, fwd+bwd, non-causal)",
                ["n", "dropout 0.1 ms", "dropout 0 ms", "time ratio", "dropout 0.1 MiB",
                 "dropout 0 MiB", "rounds"], rows)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.manual_seed(0)
    if args.memory_child:  # (d) in a fresh process whose malloc is pinned: see attnlab.measure.timing
        memory_table(args)
        return
    _footprint.report_at_exit()
    print(_machine.header() + "\n", flush=True)
    print(f"# attnlab attention benchmark — B={B}, H={H}, d_h={D_HEAD}, dtype "
          f"{str(args.dtype).removeprefix('torch.')}, {'quick' if args.quick else 'full'} mode\n")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{torch.backends.cpu.get_cpu_capability()}, {platform.machine()}, "
          f"up to {args.rounds} interleaved rounds; memory = peak tensor bytes above the inputs "
          "(torch.profiler); (d) also peak RSS increase")
    start = time.perf_counter()
    if "a" in args.only:
        ratio_table("(a) fused scaled_dot_product_attention vs F.scaled_dot_product_attention"
                    " (target ≤ 1.05)", sdpa_pair, args.sizes, args, ("none", "causal", "padding"))
    if "b" in args.only:
        ratio_table("(b) explicit path (return_weights=True) vs inline softmax(QKᵀ/√d)V"
                    " (target ≤ 1.2)", explicit_pair,
                    [n for n in args.sizes if n <= args.explicit_max_n], args)
    if "c" in args.only:
        ratio_table("(c) MultiHeadAttention vs nn.MultiheadAttention, d_model=512"
                    " (target ≤ 1.05)", mha_pair, args.sizes, args)
    if "e" in args.only:
        dropout_table(args)
    if "d" in args.only:
        _timing.run_pinned([__file__, *args.argv, "--memory-child"])
    print(f"\n(total {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
