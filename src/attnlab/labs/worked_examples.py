"""The decks' worked examples, recomputed by attnlab beside the numbers the slides print
(Ba (CSC413 Lecture 8), "Example: pooling", "Example: Bahdanau's attention", "Example:
dot-product attention", "Example: scaled dot-product attention").

Every example attends from the query ``q = (1, 1, 0)`` over three key/value vectors — the
columns ``(1, 3, 0)``, ``(0, 0, 1)``, ``(5, −1, 2)`` of the slides' matrix; keys and values are
the same vectors — and forms the context ``c = Σ_j α_j v_j``:

* **average pooling**: ``α_j = 1/3`` (content independent) —
  :func:`~attnlab.attention.pooling.average_pooling`;
* **Bahdanau's attention**, the slide's "vectorized linear attention function"
  ``f(q, k) = w_qᵀq + w_kᵀk`` with ``w = (−1, −1, −1, 2, 2, 2)`` over the stacked ``[q; k_j]``:
  the additive score's ``W_q q + W_k k`` with one hidden unit and no ``tanh``
  (:meth:`~attnlab.attention.scoring.AdditiveScore.hidden`), then the softmax;
* **dot-product attention**, ``α = softmax(Kᵀq)`` —
  :func:`~attnlab.attention.core.scaled_dot_product_attention` with ``scale=1``;
* **scaled dot-product attention**, ``α = softmax(Kᵀq / √3)`` — the same function at its
  default scale ``1/√d_k``.

Each number we compute is printed beside the slide's, to the slide's digits, with the reason
when the printed digits differ (:func:`compare`): the slide truncates instead of rounding, the
slide carries its own rounded weights into the context, or the slide has a slip. Nothing is
adjusted to match.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, Decimal
from pathlib import Path

import torch
from torch import Tensor

from attnlab.attention.additive import AdditiveAttention
from attnlab.attention.core import scaled_dot_product_attention
from attnlab.attention.masks import masked_softmax
from attnlab.attention.pooling import average_pooling
from attnlab.attention.scoring import AdditiveScore
from attnlab.labs.report import LabOptions, LabReport

TITLE = "The decks' worked examples, recomputed beside the slides"
SOURCE = 'Ba (CSC413 Lecture 8), "Example: pooling" to "Example: scaled dot-product attention"'

QUERY = (1.0, 1.0, 0.0)
KEYS = ((1.0, 3.0, 0.0), (0.0, 0.0, 1.0), (5.0, -1.0, 2.0))  # = the values
LINEAR_W_Q = (-1.0, -1.0, -1.0)  # the slide's weights on the stacked query ...
LINEAR_W_K = (2.0, 2.0, 2.0)  # ... and on the stacked key


@dataclass(frozen=True)
class Slide:
    """One slide's printed numbers, as printed (the digits tell how far the slide rounds)."""

    title: str
    weights: tuple[str, str, str]
    context: tuple[str, str, str]


SLIDES: dict[str, Slide] = {
    "average pooling": Slide('"Example: pooling"', ("0.33", "0.33", "0.33"), ("2", "0.6", "1")),
    "Bahdanau (linear f)": Slide(
        '"Example: Bahdanau\'s attention" (vectorized linear attention function)',
        ("0.5", "0", "0.5"), ("3", "1", "1")),
    "dot product": Slide('"Example: dot-product attention"', ("0.5", "0", "0.5"), ("3", "1", "0")),
    "scaled dot product": Slide(
        '"Example: scaled dot-product attention"', ("0.47", "0.06", "0.47"), ("2.8", "0.9", "1")),
}


@dataclass
class Example:
    """Our scores, weights ``α`` and context ``c`` for one slide (float64, ``(3,)`` each)."""

    name: str
    scores: Tensor | None  # None for average pooling (no score)
    weights: Tensor
    context: Tensor


def example_tensors() -> tuple[Tensor, Tensor]:
    """The query ``(1, 3)`` and the keys = values ``(3, 3)`` (one key a row), float64."""
    return torch.tensor([QUERY], dtype=torch.float64), torch.tensor(KEYS, dtype=torch.float64)


def linear_score(q: Tensor, k: Tensor) -> Tensor:
    """The slide's linear ``f(q, k_j) = w_qᵀq + w_kᵀk_j``: ``q (1, 3)``, ``k (3, 3)`` → ``(1, 3)``."""
    score = AdditiveScore(3, 3, hidden_dim=1).double()
    with torch.no_grad():
        score.w_q.weight.copy_(torch.tensor([LINEAR_W_Q]))  # (1, 3): W_q
        score.w_k.weight.copy_(torch.tensor([LINEAR_W_K]))  # (1, 3): W_k
        return score.hidden(q, score.prepare(k))[..., 0]  # (1, 3): W_q q + W_k k_j, before any tanh


def compute_examples() -> dict[str, Example]:
    """Every slide's example through attnlab's own functions."""
    q, k = example_tensors()  # (1, 3), (3, 3); values = keys
    avg, avg_w = average_pooling(q, k, return_weights=True)  # (1, 3), (1, 3)
    lin_s = linear_score(q, k)  # (1, 3)
    lin_w = masked_softmax(lin_s)  # (1, 3)
    dot, dot_w = scaled_dot_product_attention(q, k, k, scale=1.0, return_weights=True)
    sc, sc_w = scaled_dot_product_attention(q, k, k, return_weights=True)  # scale 1/√3
    return {
        "average pooling": Example("average pooling", None, avg_w[0], avg[0]),
        "Bahdanau (linear f)": Example("Bahdanau (linear f)", lin_s[0], lin_w[0], (lin_w @ k)[0]),
        "dot product": Example("dot product", q[0] @ k.T, dot_w[0], dot[0]),
        "scaled dot product": Example("scaled dot product", q[0] @ k.T / math.sqrt(3), sc_w[0], sc[0]),
    }


def additive_with_tanh() -> Example:
    """Not on a slide: Bahdanau's full additive score ``w_vᵀ tanh(W_q q + W_k k)`` with the
    slide's weights and ``w_v = 1`` (:class:`~attnlab.attention.additive.AdditiveAttention`)."""
    q, k = example_tensors()
    attention = AdditiveAttention(3, 3, hidden_dim=1).double()
    with torch.no_grad():
        attention.score.w_q.weight.copy_(torch.tensor([LINEAR_W_Q]))
        attention.score.w_k.weight.copy_(torch.tensor([LINEAR_W_K]))
        attention.score.w_v.weight.fill_(1.0)
        context, weights = attention(q[None], k[None], k[None], return_weights=True)  # (1, 1, 3) each
        scores = attention.score(q, k)[0]  # (3,)
    return Example("additive with tanh", scores, weights[0, 0], context[0, 0])


def _digits(printed: str) -> int:
    return len(printed.split(".")[1]) if "." in printed else 0


def _at(value: float, digits: int, rounding: str = ROUND_HALF_EVEN) -> str:
    """``value`` to ``digits`` decimals, as the slide would print it (no ``-0``)."""
    text = str(Decimal(repr(value)).quantize(Decimal(1).scaleb(-digits), rounding=rounding))
    return text[1:] if text.startswith("-") and Decimal(text) == 0 else text


@dataclass
class Comparison:
    """One printed number against ours: ``status`` is ``agrees``, ``rounding`` or ``slip``."""

    ours: float
    printed: str
    ours_at_slide_digits: str
    status: str
    why: str


def compare(ours: float, printed: str, *, from_slide: float | None = None,
            rest: float | None = None) -> Comparison:
    """Compare ``ours`` with the slide's ``printed`` number at the slide's digits.

    ``from_slide``: the same number recomputed from the slide's own printed weights (context
    entries, used when close to ours); ``rest``: one minus the slide's other printed weights
    (weights). When rounding ours does not give the slide's digits, the explanations that
    reproduce them are listed: truncation of ours, the slide's rounded weights carried through,
    or else weights made to sum to one (within two units of the slide's last digit). If none
    does, it is a slip of the slide.
    """
    d = _digits(printed)
    rounded = _at(ours, d)
    if rounded == _at(float(printed), d):
        return Comparison(ours, printed, rounded, "agrees", f"{ours:.4f} rounds to {printed}")
    why = []
    if _at(ours, d, ROUND_DOWN) == printed:
        why.append(f"the slide truncates {ours:.4f} (rounding gives {rounded})")
    if from_slide is not None and _at(from_slide, d) == printed and abs(ours - from_slide) < 10.0**-d:
        why.append(f"the slide's own rounded weights give {from_slide:.4f}")
    if not why and rest is not None and _at(rest, d) == printed and abs(ours - float(printed)) < 2 * 10.0**-d:
        why.append(f"1 minus the slide's other weights is {rest:.4f}: the slide makes its weights sum to 1")
    if why:
        return Comparison(ours, printed, rounded, "rounding", "; ".join(why))
    own = "" if from_slide is None else f"; the slide's own weights give {from_slide:.4f}"
    return Comparison(ours, printed, rounded, "slip", f"slide slip: ours is {ours:.4f}{own}")


def compare_example(example: Example, slide: Slide) -> list[Comparison]:
    """The three weights, then the three context entries, each against the slide."""
    printed_w = torch.tensor([float(w) for w in slide.weights], dtype=torch.float64)  # (3,)
    _, values = example_tensors()
    slide_context = printed_w @ values  # (3,): the context the slide's own weights give
    rows = [compare(float(w), p, rest=1.0 - float(printed_w.sum() - printed_w[j]))
            for j, (w, p) in enumerate(zip(example.weights, slide.weights, strict=True))]
    if any(row.status == "slip" for row in rows):  # the context can only carry the slip on
        return rows + [_carried(float(c), p, float(s))
                       for c, p, s in zip(example.context, slide.context, slide_context, strict=True)]
    rows += [compare(float(c), p, from_slide=float(s))
             for c, p, s in zip(example.context, slide.context, slide_context, strict=True)]
    return rows


def _carried(ours: float, printed: str, from_slide: float) -> Comparison:
    """A context entry of a slide whose weights are a slip: it follows them or not."""
    d = _digits(printed)
    follows = _at(from_slide, d) == printed
    why = (f"the slide's weights (a slip) give {from_slide:.4f}: the context follows them" if follows
           else f"slide slip: ours is {ours:.4f}; the slide's own weights give {from_slide:.4f}")
    return Comparison(ours, printed, _at(ours, d), "slip", why)


def _same_weights_as(name: str, examples: dict[str, Example]) -> str:
    """Which other example's weights, at the slide's digits, are the weights slide ``name`` prints."""
    printed = SLIDES[name].weights
    same = [other for other, ex in examples.items() if other != name
            and all(_at(float(w), _digits(p)) == p for w, p in zip(ex.weights, printed, strict=True))]
    if not same:
        return " The printed weights match no example's."
    return f" The printed weights are, at the slide's digits, those of: {', '.join(same)}."


def _vec(x: Tensor, digits: int = 4) -> str:
    return "(" + ", ".join(f"{float(v):.{digits}f}" for v in x) + ")"


def plot(examples: dict[str, Example], path: Path) -> Path:
    """One panel per slide: the slide's weights beside ours, the two contexts in the title."""
    from matplotlib.figure import Figure

    from attnlab.visualize import save_figure

    fig = Figure(figsize=(4 * len(examples), 3.8), layout="constrained")
    axes = fig.subplots(1, len(examples))
    for ax, (name, example) in zip(axes, examples.items(), strict=True):
        slide = SLIDES[name]
        x = torch.arange(3).numpy()
        ax.bar(x - 0.2, [float(w) for w in slide.weights], 0.4, label="slide")
        ax.bar(x + 0.2, example.weights.numpy(), 0.4, label="attnlab")
        ax.set_xticks(range(3), ["(1,3,0)", "(0,0,1)", "(5,-1,2)"])
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{name}\nslide c = ({', '.join(slide.context)}); ours c = {_vec(example.context, 2)}",
                     fontsize=9)
        ax.set_xlabel("key / value")
    axes[0].set_ylabel("attention weight α")
    axes[0].legend(fontsize=8)
    fig.suptitle("Query (1, 1, 0): Ba (CSC413 Lecture 8)'s worked examples recomputed")
    return save_figure(fig, path)


def run(out_dir: Path, options: LabOptions) -> LabReport:
    """Recompute every example, tabulate ours beside the slides', save the bar chart."""
    report = LabReport("worked-examples", TITLE, SOURCE)
    examples = compute_examples()
    report.text(
        "Query q = (1, 1, 0); keys = values k₁ = (1, 3, 0), k₂ = (0, 0, 1), k₃ = (5, −1, 2) (the "
        "columns of the slides' matrix). Each number is ours in float64, then ours at the slide's "
        "digits, then the slide's, and why they differ where they do."
    )
    counts = {"agrees": 0, "rounding": 0, "slip": 0}
    for name, example in examples.items():
        slide = SLIDES[name]
        rows = compare_example(example, slide)
        labels = [f"α{j + 1}" for j in range(3)] + [f"c[{j + 1}]" for j in range(3)]
        scores = "" if example.scores is None else f" Scores {_vec(example.scores)}."
        if any(r.status == "slip" for r in rows[:3]):
            scores += _same_weights_as(name, examples)
        report.table(["", "ours", "ours at slide's digits", "slide", "status", "why"],
                     [[lab, f"{r.ours:.4f}", r.ours_at_slide_digits, r.printed, r.status, r.why]
                      for lab, r in zip(labels, rows, strict=True)],
                     caption=f"**{name}** — {slide.title}.{scores}")
        key = name.split(" (")[0].replace(" ", "_").lower()
        report.number(f"{key}_weights", [float(w) for w in example.weights])
        report.number(f"{key}_context", [float(c) for c in example.context])
        report.number(f"{key}_status", [r.status for r in rows])
        for r in rows:
            counts[r.status] += 1
    for status, n in counts.items():
        report.number(f"numbers_{status}", n)
    _, keys = example_tensors()
    key_terms = torch.tensor(LINEAR_W_K, dtype=torch.float64) @ keys.T  # (3,): w_kᵀk_j
    report.text(
        "Bahdanau's linear f, as the deck's text gives it (w = (−1, −1, −1, 2, 2, 2) against the "
        f"stacked [q; k_j]): its key terms w_kᵀk_j are {_vec(key_terms, 0)}, so k₁ and k₃ cannot tie "
        "and no rounding turns its weights into the printed 0.5 / 0 / 0.5; the printed context "
        "(3, 1, 1) is right for those printed weights. (The deck's text is extracted from the "
        "slide; a weight lost in extraction would explain it as well as a slip on the slide.)"
    )
    tanh = additive_with_tanh()
    report.number("additive_tanh_weights", [float(w) for w in tanh.weights])
    report.text(
        f"Of the {sum(counts.values())} printed numbers, {counts['agrees']} agree with ours at the "
        f"slide's digits, {counts['rounding']} differ by the slide's rounding and {counts['slip']} are "
        "slips. Not on a slide: Bahdanau's full score w_vᵀ tanh(W_q q + W_k k) with the same weights "
        f"and w_v = 1 scores {_vec(tanh.scores)} (tanh saturates both 6 and 10 at ≈ 1) and gives "
        f"α = {_vec(tanh.weights)}, c = {_vec(tanh.context)}."
    )
    report.figure(plot(examples, out_dir / "worked_examples.png"),
                  "The slides' attention weights beside attnlab's, one panel per slide")
    return report
