"""The two meanings of "bank" through the real all-MiniLM-L6-v2 weights.

Li (Transformer Part I), "Why Attention?": "I swam across the river to get to the other
bank." / "I walked across the road to get cash from the bank." — "It is the same word 'bank'
in both two sentences. Do they have the same meaning? Obviously not. [...] other words
(tokens) also contribute to 'bank'."

Measured through MiniLM (6 layers, 12 heads):

* the static embedding ``E[bank]`` — the row of the token-embedding table, the same in both
  sentences (cosine exactly 1);
* the layer-0 vector, the embedding output ``LN(E[w] + E_type + P_i)``: it also carries the
  position ``i``, so it is the same only when "bank" stands at the same position (it does in
  Li's two sentences; a third sentence moves it);
* the contextual vectors after each layer 1..6: cosine similarity per layer, beside a
  baseline (the mean cosine of the first "bank" with the other words of the second sentence);
* which tokens "bank" attends to, per layer, mean over the 12 heads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from attnlab.labs.minilm import cosine, load_minilm
from attnlab.labs.report import LabOptions, LabReport
from attnlab.pipelines import EncodedSentence

__all__ = ["MOVED", "SENTENCES", "SOURCE", "TITLE", "BankComparison", "compare", "run"]

TITLE = "'bank' by the river and 'bank' with the cash: static vs contextual vectors in all-MiniLM-L6-v2"
SOURCE = "Li (Transformer Part I)"
SENTENCES = (
    "I swam across the river to get to the other bank.",
    "I walked across the road to get cash from the bank.",
)
MOVED = "The bank was closed."  # "bank" at another position: does the layer-0 input change?
WORD = "bank"
SPECIAL = ("[CLS]", "[SEP]", ".")


@dataclass
class BankComparison:
    """``word`` in two sentences, layer by layer (``L`` layers, ``L + 1`` hidden states)."""

    encoded: tuple[EncodedSentence, EncodedSentence]
    positions: tuple[int, int]  # where the word stands in each
    static_cosine: float  # cosine of the two token-embedding rows E[word]
    cosines: list[float]  # L + 1: cosine of the word's hidden states, layer 0 (input) .. L
    baseline: list[float]  # L + 1: mean cosine of the first word with the second sentence's other words
    attention: tuple[Tensor, Tensor]  # (L, n_s) each: the word's attention row, mean over heads


def compare(encoder, sentences: tuple[str, str] = SENTENCES, word: str = WORD) -> BankComparison:
    """Run both sentences through ``encoder`` and compare ``word`` in them (see module docstring)."""
    first, second = (encoder.attention(s) for s in sentences)
    i, j = first.index(word), second.index(word)
    table = encoder.model.token_embedding.weight.detach()
    static = cosine(table[first.input_ids[i]], table[second.input_ids[j]])
    others = [t for t, tok in enumerate(second.tokens) if t != j and tok not in SPECIAL]
    cosines, baseline = [], []
    for a, b in zip(first.hidden, second.hidden, strict=True):  # (n_1, d), (n_2, d)
        cosines.append(cosine(a[i], b[j]))
        baseline.append(sum(cosine(a[i], b[t]) for t in others) / len(others))
    attention = tuple(torch.stack([w[:, p].mean(0) for w in enc.attention])  # (L, n)
                      for enc, p in ((first, i), (second, j)))
    return BankComparison((first, second), (i, j), static, cosines, baseline, attention)


def moved_input_cosine(encoder, reference: EncodedSentence, sentence: str = MOVED, word: str = WORD) -> tuple:
    """Layer-0 vector of ``word`` in ``reference`` against ``word`` in ``sentence`` (another
    position): ``(position there, cosine)``."""
    moved = encoder.attention(sentence)
    k = moved.index(word)
    return k, cosine(reference.hidden[0][reference.index(word)], moved.hidden[0][k])


def run(out_dir: Path, options: LabOptions) -> LabReport:
    """Compare "bank" in Li's two sentences, record the per-layer cosines and draw them."""
    report = LabReport("bank", TITLE, SOURCE)
    encoder = load_minilm(options)
    result = compare(encoder)
    first, second = result.encoded
    i, j = result.positions
    report.number("static_cosine", result.static_cosine)
    report.number("same_token_id", bool(first.input_ids[i] == second.input_ids[j]))
    report.number("positions", [i, j])
    report.number("cosines", result.cosines)
    report.number("baseline_cosines", result.baseline)
    for layer, value in enumerate(result.cosines):
        report.number(f"cosine_layer_{layer}", value)
    moved_at, moved_cos = moved_input_cosine(encoder, first)
    report.number("moved_layer0_cosine", moved_cos)
    _static_text(report, result, moved_at, moved_cos)
    _cosine_section(report, out_dir, result)
    _attention_section(report, out_dir, result)
    return report


def _static_text(report: LabReport, result: BankComparison, moved_at: int, moved_cos: float) -> None:
    first, second = result.encoded
    i, j = result.positions
    report.text(
        f'1. "{first.sentence}"  →  {" ".join(first.tokens)}\n'
        f'2. "{second.sentence}"  →  {" ".join(second.tokens)}\n\n'
        f"Static embedding: 'bank' is token id {int(first.input_ids[i])} in both, so both read the "
        f"same row E[bank] of the token-embedding table: cosine **{result.static_cosine:.6f}**.\n\n"
        f"Layer 0 (the embedding output LN(E[w] + E_type + P_i) that enters layer 1): 'bank' is word "
        f"piece {i} in sentence 1 and {j} in sentence 2, so it gets the same position embedding too; "
        f"cosine {result.cosines[0]:.6f}. Position embeddings do make the layer-0 input differ when the "
        f'word moves: in "{MOVED}" it is piece {moved_at}, and its layer-0 vector has cosine '
        f"{moved_cos:.4f} with sentence 1's."
    )


def _cosine_section(report: LabReport, out_dir: Path, result: BankComparison) -> None:
    rows = [[layer, c, b] for layer, (c, b) in enumerate(zip(result.cosines, result.baseline, strict=True))]
    report.table(["layer", "cos(bank₁, bank₂)", "baseline: mean cos(bank₁, other words of 2)"], rows,
                 caption="Contextual vectors of 'bank', layer by layer (0 = embedding output):")
    from matplotlib.figure import Figure

    from attnlab.visualize import save_figure

    fig = Figure(figsize=(6.5, 4), layout="constrained")
    ax = fig.add_subplot()
    layers = range(len(result.cosines))
    ax.plot(layers, result.cosines, "o-", label="bank (river) vs bank (cash)")
    ax.plot(layers, result.baseline, "s--", label="bank (river) vs the other words of sentence 2")
    ax.axhline(result.static_cosine, color="k", lw=1, ls=":", label="static embedding E[bank]: 1")
    ax.set(xlabel="layer (0 = embedding output)", ylabel="cosine similarity", ylim=(None, 1.02),
           title="'bank' in Li's two sentences, all-MiniLM-L6-v2")
    ax.legend(fontsize=8)
    path = save_figure(fig, out_dir / "bank_cosine.png")
    report.figure(path, "Cosine similarity of the two 'bank' vectors after each layer")


def _attention_section(report: LabReport, out_dir: Path, result: BankComparison) -> None:
    rows, top, top_word = [], {}, {}
    for s, (enc, weights) in enumerate(zip(result.encoded, result.attention, strict=True), start=1):
        words = [t for t, tok in enumerate(enc.tokens) if tok not in SPECIAL and tok != WORD]
        top[f"sentence_{s}"] = [enc.tokens[int(w.argmax())] for w in weights]
        top_word[f"sentence_{s}"] = [enc.tokens[words[int(w[words].argmax())]] for w in weights]
        for layer, w in enumerate(weights, start=1):
            best = torch.argsort(w, descending=True)[:3]
            word = words[int(w[words].argmax())]
            rows.append([s, layer, ", ".join(f"{enc.tokens[int(t)]} {float(w[t]):.2f}" for t in best),
                         f"{enc.tokens[word]} {float(w[word]):.2f}"])
    report.number("top_attended", top)
    report.number("top_attended_word", top_word)
    report.table(["sentence", "layer", "'bank' attends most to (mean over 12 heads)",
                  "top word (not [CLS], [SEP], '.', 'bank')"], rows)
    path = _plot_attention(out_dir / "bank_attention.png", result)
    report.figure(path, "Which tokens 'bank' attends to in each layer (mean over the 12 heads); below, "
                        "the same weights without the [CLS] column, on their own colour scale")


def _plot_attention(path: Path, result: BankComparison) -> Path:
    from matplotlib.figure import Figure

    from attnlab.visualize import draw_attention, save_figure

    fig = Figure(figsize=(12, 6.6), layout="constrained")
    axes = fig.subplots(2, 2)
    layers = [f"layer {layer}" for layer in range(1, result.attention[0].shape[0] + 1)]
    for row, start in enumerate((0, 1)):  # all keys; then without [CLS] (key 0)
        vmax = max(float(w[:, start:].max()) for w in result.attention)
        for ax, enc, weights in zip(axes[row], result.encoded, result.attention, strict=True):
            title = enc.sentence if start == 0 else "the same, without [CLS]"
            image = draw_attention(ax, weights[:, start:], x_labels=enc.tokens[start:], y_labels=layers,
                                   vmax=vmax, title=title, axis_names=("key token", "'bank' as the query"))
        fig.colorbar(image, ax=list(axes[row]), label="attention weight, mean over heads")
    return save_figure(fig, path)
