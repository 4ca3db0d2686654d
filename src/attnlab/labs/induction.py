"""Induction heads in SmolLM2-135M-Instruct: every layer × head scored on repeated random tokens.

Olsson et al. 2022, "In-context Learning and Induction Heads" (after Elhage et al. 2021, "A
Mathematical Framework for Transformer Circuits"): an induction head completes ``[A][B] … [A] →
[B]``. Reading the second ``[A]`` it attends to the token right *after* the earlier ``[A]``
(prefix matching) and copies it into the prediction (copying). On a sequence of ``T`` random
tokens repeated twice, ``x_{T+m} = x_m``, only such a mechanism can predict the second half,
so the loss drops there (in-context learning). This lab runs ``B`` such sequences ``(B, 2T)``
(seeded, tokens drawn uniformly from the ordinary vocabulary) and measures, for each layer
``l`` and head ``h``:

* **prefix-matching score**: the mean over rows and over the second repeat's queries ``i =
  T + m`` of ``α_{i, m+1}``, the attention on the token after the earlier occurrence (Olsson et
  al.'s definition; a head that ignores content puts about ``1/i`` there);
* **copying score** (a measured stand-in for Olsson et al.'s OV-eigenvalue copying, this lab's
  own definition): what the head writes when it reads key ``j``, ``o_j = v_j W_O^h`` (its value
  through its slice of the output projection), read straight through the unembedding —
  ``Δ_j = W_U (γ ⊙ o_j)`` with ``γ`` the final RMSNorm's gain (its ``1/rms`` is one positive
  number a query: left out) — gives ``z_j = (Δ_j[x_j] − mean_v Δ_j[v]) / std_v Δ_j[v]``, how
  many standard deviations of the vocabulary's logits the head lifts the very token it reads;
  the score is the attention-weighted ``Σ_j α_ij z_j``, averaged like the prefix score (the
  standard deviation over the vocabulary is ``√(sᵀ C s)`` with ``C`` the covariance of
  ``W_U``'s rows, so no ``V``-wide product is formed);
* **in-context learning**: the mean loss (nats) predicting the first repeat's tokens ``x_1 ..
  x_{T−1}`` against the second's ``x_{T+1} .. x_{2T−1}``.

A head **is an induction head here** when its prefix-matching score is at least
:data:`PREFIX_AT` and its copying score above :data:`COPYING_AT` (what it writes, read straight
out, raises the token it reads).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.labs.report import LabOptions, LabReport

__all__ = ["COPYING_AT", "PREFIX_AT", "SOURCE", "TITLE", "InductionScores", "induction_scores",
           "repeated_tokens", "run"]

TITLE = "Induction heads: prefix matching, copying and in-context learning in SmolLM2-135M"
SOURCE = ('Olsson et al. 2022, "In-context Learning and Induction Heads"; Elhage et al. 2021, '
          '"A Mathematical Framework for Transformer Circuits"')
PREFIX_AT, COPYING_AT = 0.4, 0.0
SETTINGS = {False: (16, 64), True: (2, 16)}  # quick → (B sequences, T tokens repeated twice)


@dataclass
class InductionScores:
    """Every layer × head of one model on ``(B, 2T)`` repeated tokens."""

    prefix: Tensor  # (L, H) prefix-matching score
    copying: Tensor  # (L, H) copying score (z, module doc)
    loss_first: float  # mean loss on the first repeat (nats)
    loss_second: float  # on the second
    weights: list[Tensor]  # per layer (B, H, 2T, 2T)

    def heads(self) -> list[tuple[int, int]]:
        """``(layer, head)``, counted from 1, of the heads that pass both thresholds, the
        highest prefix score first."""
        passing = ((self.prefix >= PREFIX_AT) & (self.copying > COPYING_AT)).nonzero().tolist()
        passing.sort(key=lambda lh: -float(self.prefix[lh[0], lh[1]]))
        return [(layer + 1, head + 1) for layer, head in passing]


def repeated_tokens(batch: int, length: int, vocab_size: int, *, seed: int = 0, low: int = 0) -> Tensor:
    """``(batch, 2·length)``: ``length`` tokens drawn uniformly from ``low .. vocab_size − 1``
    (seeded), then the same ``length`` again."""
    if not 0 <= low < vocab_size or length < 2 or batch < 1:
        raise ValueError(f"need batch >= 1, length >= 2, 0 <= low < vocab_size, got {batch}, {length}, "
                         f"{low}, {vocab_size}")
    generator = torch.Generator().manual_seed(seed)
    half = torch.randint(low, vocab_size, (batch, length), generator=generator)
    return torch.cat([half, half], dim=1)


@contextmanager
def attention_inputs(model: nn.Module) -> Iterator[list[Tensor]]:
    """While active, every layer's self-attention appends its input ``(B, n, d)`` (the normed
    residual stream it projects) to the list."""
    seen: list[Tensor] = []
    handles = [layer.self_attn.register_forward_pre_hook(lambda _, args: seen.append(args[0]))
               for layer in model.decoder.layers]
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def ablated(model: nn.Module, layer: int, head: int) -> Iterator[None]:
    """While active, head ``head`` of layer ``layer`` (from 1) writes nothing: its slice of the
    output projection's input is zeroed."""
    attn = model.decoder.layers[layer - 1].self_attn
    cols = slice((head - 1) * attn.head_dim, head * attn.head_dim)

    def zero(_: nn.Module, args: tuple) -> tuple:
        x = args[0].clone()
        x[..., cols] = 0
        return (x, *args[1:])

    handle = attn.out_proj.register_forward_pre_hook(zero)
    try:
        yield
    finally:
        handle.remove()


@torch.no_grad()
def second_repeat_loss(model: nn.Module, ids: Tensor) -> float:
    """Mean loss (nats) on the second repeat's tokens ``x_{T+1} .. x_{2T−1}`` of ``ids`` ``(B, 2T)``."""
    t = ids.shape[1] // 2
    logits = model(ids)  # (B, 2T, V)
    return float(F.cross_entropy(logits[:, t:-1].transpose(1, 2).float(), ids[:, t + 1 :]))


def head_writes(attn: nn.Module, x: Tensor) -> Tensor:
    """``(B, H, n, d)``: what each head adds to the residual stream when it reads key ``j`` with
    all its attention, ``v_j W_O^h`` (grouped heads share ``v``)."""
    d, kv_dim, d_h = attn.d_model, attn.kv_dim, attn.head_dim
    bias = attn.in_proj.bias
    v = F.linear(x, attn.in_proj.weight[d + kv_dim :], None if bias is None else bias[d + kv_dim :])
    v = v.unflatten(-1, (attn.num_kv_heads, d_h)).transpose(1, 2)  # (B, H_kv, n, d_h)
    v = v.repeat_interleave(attn.num_heads // attn.num_kv_heads, dim=1)  # (B, H, n, d_h)
    w_o = attn.out_proj.weight.T.unflatten(0, (attn.num_heads, d_h))  # (H, d_h, d)
    return torch.einsum("bhne,hed->bhnd", v, w_o)  # (B, H, n, d)


def unembedding_spread(unembed: Tensor) -> tuple[Tensor, Tensor]:
    """``W_U``'s rows centred on their mean ``(V, d)`` and their covariance ``C`` ``(d, d)``
    (float64): ``mean_v Δ[v]`` and ``std_v Δ[v]`` of any ``Δ = W_U s`` without forming it."""
    centred = unembed.double() - unembed.double().mean(0)
    return centred, centred.T @ centred / unembed.shape[0]


def copy_z(writes: Tensor, ids: Tensor, spread: tuple[Tensor, Tensor], gain: Tensor) -> Tensor:
    """``(B, H, n)``: ``z_j`` of the module doc for every head and key (float64), with ``spread``
    from :func:`unembedding_spread`."""
    centred, cov = spread
    s = writes.double() * gain.double()  # (B, H, n, d)
    lift = torch.einsum("bhnd,bnd->bhn", s, centred[ids])  # Δ_j[x_j] − mean_v Δ_j[v]
    std = torch.einsum("bhnd,de,bhne->bhn", s, cov, s).clamp_min(0).sqrt()
    return lift / std.clamp_min(1e-12)


@torch.no_grad()
def induction_scores(model: nn.Module, ids: Tensor) -> InductionScores:
    """Scores of every layer × head of a GPT on ``ids`` ``(B, 2T)`` (:func:`repeated_tokens`)."""
    n = ids.shape[1]
    if n % 2 or not torch.equal(ids[:, : n // 2], ids[:, n // 2 :]):
        raise ValueError("ids must be a sequence repeated twice, (B, 2T)")
    t = n // 2
    with attention_inputs(model) as inputs:
        logits, weights = model(ids, return_weights=True)  # (B, n, V), [(B, H, n, n)] × L
    queries = torch.arange(t, n)  # the second repeat
    prefix = torch.stack([w[:, :, queries, queries - t + 1].mean(dim=(0, 2)) for w in weights])  # (L, H)
    gain, spread = model.decoder.norm.weight, unembedding_spread(model.head.weight)
    copying = []
    for layer, x, w in zip(model.decoder.layers, inputs, weights, strict=True):
        z = copy_z(head_writes(layer.self_attn, x), ids, spread, gain)  # (B, H, n)
        copying.append((w.double() @ z.unsqueeze(-1)).squeeze(-1)[:, :, t:].mean(dim=(0, 2)))
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2).float(), ids[:, 1:], reduction="none")  # (B, n-1)
    return InductionScores(prefix.float(), torch.stack(copying).float(), float(nll[:, : t - 1].mean()),
                           float(nll[:, t:].mean()), weights)


def run(out_dir: Path, options: LabOptions) -> LabReport:
    """Score every head of SmolLM2 on repeated random tokens, name the induction heads, ablate the
    prefix-matching ones, draw them."""
    from attnlab.labs.induction_plots import plot_pattern, plot_scores
    from attnlab.labs.smollm2 import load_smollm2

    report = LabReport("induction", TITLE, SOURCE)
    pipeline = load_smollm2(options)
    model, low = pipeline.model, first_ordinary(pipeline.tokenizer)
    batch, length = SETTINGS[options.quick]
    ids = repeated_tokens(batch, length, model.config.vocab_size, seed=options.seed, low=low)
    ids = ids.to(next(model.parameters()).device)
    scores = induction_scores(model, ids)
    heads = scores.heads()
    candidates = [(layer + 1, head + 1) for layer, head in (scores.prefix >= PREFIX_AT).nonzero().tolist()]
    without = {}
    for layer, head in candidates:  # Olsson et al.'s ablation: the loss once the head is silenced
        with ablated(model, layer, head):
            without[f"{layer}.{head}"] = second_repeat_loss(model, ids)
    report.number("grid_shape", list(scores.prefix.shape))
    report.number("loss_first_repeat", scores.loss_first)
    report.number("loss_second_repeat", scores.loss_second)
    report.number("induction_heads", [f"{layer}.{head}" for layer, head in heads])
    report.number("second_repeat_loss_without", without)
    report.number("prefix_matching", scores.prefix.tolist())
    report.number("copying", scores.copying.tolist())
    _summary(report, scores, heads, (low, model.config.vocab_size), (batch, length))
    _table(report, scores, heads, without)
    report.figure(plot_scores(out_dir / "induction_scores.png", scores.prefix, scores.copying, heads),
                  f"Prefix-matching and copying score of every layer × head; boxed: the induction heads "
                  f"(prefix ≥ {PREFIX_AT}, copying > {COPYING_AT:g})")
    best = heads[0] if heads else _strongest(scores.prefix)
    pattern = scores.weights[best[0] - 1][0, best[1] - 1]  # (2T, 2T): the first sequence
    report.figure(plot_pattern(out_dir / "induction_pattern.png", pattern, best,
                               float(scores.prefix[best[0] - 1, best[1] - 1])),
                  f"Layer {best[0]} head {best[1]} on one repeated sequence: the stripe T − 1 below the "
                  "diagonal is the attention on the token after the earlier occurrence")
    return report


def _strongest(prefix: Tensor) -> tuple[int, int]:
    flat = int(prefix.argmax())
    return flat // prefix.shape[1] + 1, flat % prefix.shape[1] + 1


def first_ordinary(tokenizer: object) -> int:
    """The first id after the tokenizer's special tokens (SmolLM2's ids 0-16: ``<|endoftext|>``,
    ``<|im_start|>``, ...), from which the random tokens are drawn."""
    return max(tokenizer.hf.get_added_tokens_decoder(), default=-1) + 1


def _summary(report: LabReport, scores: InductionScores, heads: list[tuple[int, int]],
             ids: tuple[int, int], setting: tuple[int, int]) -> None:
    (layers, per_layer), (batch, length) = scores.prefix.shape, setting
    report.text(
        f"{batch} sequences of {length} random tokens (ids {ids[0]}-{ids[1] - 1} "
        f"of the vocabulary, seed-fixed), each repeated once: {2 * length} tokens. Mean loss on the first "
        f"repeat **{scores.loss_first:.3f} nats**, on the second **{scores.loss_second:.3f} nats** — the "
        f"model predicts the repeat from its context (in-context learning). Of {layers * per_layer} heads, "
        f"**{len(heads)}** pass prefix matching ≥ {PREFIX_AT} and copying > {COPYING_AT:g}: "
        f"{', '.join(f'{layer}.{head}' for layer, head in heads) or 'none'} (layer.head, from 1)."
    )


def _table(report: LabReport, scores: InductionScores, heads: list[tuple[int, int]],
           without: dict[str, float]) -> None:
    rows = []
    for name, loss in sorted(without.items(), key=lambda item: -item[1]):
        layer, head = (int(part) for part in name.split("."))
        at = (layer - 1, head - 1)
        rows.append([name, float(scores.prefix[at]), float(scores.copying[at]),
                     "yes" if (layer, head) in heads else "no", loss, loss - scores.loss_second])
    report.table(["head", "prefix matching", "copying (z)", "induction head", "second-repeat loss without it",
                  "rise (nats)"], rows,
                 caption=f"Every head with prefix matching ≥ {PREFIX_AT}, silenced one at a time (its output "
                         f"zeroed; second-repeat loss with every head: {scores.loss_second:.3f}):")
