"""What "it" attends to in every layer × head of all-MiniLM-L6-v2 ("tired" vs "wide").

Steinert-Threlkeld (Transformers I), "Attention visualisation", and Ba (CSC413 Lecture 8)
show self-attention resolving a pronoun: in "The animal didn't cross the street because it
was too tired" "it" is the animal, with "too wide" it is the street. This lab runs both
sentences through the real MiniLM weights (a small sentence encoder: 6 layers × 12 heads) and
reports what it measures, every head, without picking:

* the grid: for each layer × head, the token the query "it" puts most weight on and that
  weight, coloured by whether it is "animal", "street" or another token;
* the weights on "animal" and on "street", per head and sentence, and the head's answer
  (the larger of the two);
* the heads whose answer flips between the sentences, split into flips the right way
  (animal with "tired", street with "wide") and the wrong way.

The two sentences differ only in their last word, so in layer 1 — whose queries and keys are
the embedding outputs — "it"'s scores for "animal" and "street" are the same in both, and so
is the ratio of their weights: no layer-1 head can flip; any flip needs a deeper layer.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

from attnlab.labs.minilm import load_minilm
from attnlab.labs.report import LabOptions, LabReport
from attnlab.pipelines import EncodedSentence

__all__ = [
    "SENTENCES", "SOURCE", "TITLE", "HeadReading", "flips", "layer1_ratio_difference", "read_heads", "run",
]

TITLE = "Coreference: what 'it' attends to in every all-MiniLM-L6-v2 head ('tired' vs 'wide')"
SOURCE = "Steinert-Threlkeld (Transformers I); Ba (CSC413 Lecture 8)"
SENTENCES = {
    "tired": "The animal didn't cross the street because it was too tired",
    "wide": "The animal didn't cross the street because it was too wide",
}
EXPECTED = {"tired": "animal", "wide": "street"}  # the reading a person gives
PRONOUN, CANDIDATES = "it", ("animal", "street")
CATEGORY_COLOURS = {"animal": "#f4a261", "street": "#6fa8dc", "other": "#e5e5e5"}


@dataclass(frozen=True)
class HeadReading:
    """The query "it" in one head of one layer (layers and heads count from 1)."""

    layer: int
    head: int
    top_token: str  # the key with the largest weight
    top_weight: float
    animal: float  # weight on "animal"
    street: float  # weight on "street"

    @property
    def answer(self) -> str:
        """The candidate with the larger weight (ties read as "animal")."""
        return "animal" if self.animal >= self.street else "street"

    @property
    def category(self) -> str:
        return self.top_token if self.top_token in CANDIDATES else "other"


def read_heads(encoded: EncodedSentence) -> list[list[HeadReading]]:
    """``[layer][head]`` readings of the query "it" in every layer's ``(H, n, n)`` weights."""
    it = encoded.index(PRONOUN)
    animal, street = (encoded.index(word) for word in CANDIDATES)
    grid = []
    for layer, weights in enumerate(encoded.attention, start=1):
        row = weights[:, it]  # (H, n): "it" as the query in every head
        grid.append([
            HeadReading(layer, h + 1, encoded.tokens[int(r.argmax())], float(r.max()),
                        float(r[animal]), float(r[street]))
            for h, r in enumerate(row)
        ])
    return grid


def flips(first: list[list[HeadReading]], second: list[list[HeadReading]]) -> list[tuple[int, int]]:
    """``(layer, head)`` of every head whose answer differs between the two grids."""
    return [(a.layer, a.head) for ra, rb in zip(first, second, strict=True)
            for a, b in zip(ra, rb, strict=True) if a.answer != b.answer]


def run(out_dir: Path, options: LabOptions) -> LabReport:
    """Read every head for both sentences, draw the grids, record the flips."""
    report = LabReport("coreference", TITLE, SOURCE)
    encoder = load_minilm(options)
    encoded = {key: encoder.attention(s) for key, s in SENTENCES.items()}
    grids = {key: read_heads(enc) for key, enc in encoded.items()}
    flipped = flips(grids["tired"], grids["wide"])
    right = [lh for lh in flipped if _reading(grids["tired"], lh).answer == EXPECTED["tired"]]
    wrong = [lh for lh in flipped if lh not in right]
    report.number("grid_shape", [len(grids["tired"]), len(grids["tired"][0])])
    report.number("flips", flipped)
    report.number("flips_right_way", right)
    report.number("flips_wrong_way", wrong)
    _summary(report, encoded, grids, right, wrong)
    _flip_table(report, grids, flipped, right)
    report.number("layer1_ratio_max_difference", layer1_ratio_difference(grids))
    _layer_table(report, grids)
    path = _plot_grids(out_dir / "coreference_grid.png", grids)
    report.figure(path, "The token 'it' attends to most in every layer × head, with its weight")
    path = _plot_candidates(out_dir / "coreference_animal_vs_street.png", grids, flipped)
    report.figure(path, "Weight on 'animal' minus weight on 'street' per head; boxed heads flip")
    return report


def layer1_ratio_difference(grids: dict[str, list[list[HeadReading]]]) -> float:
    """Largest difference, over layer 1's heads, of ``log w(animal) − log w(street)`` between
    the sentences: 0 up to rounding, since layer 1's scores for both nouns are the same."""
    ratios = [torch.tensor([[r.animal, r.street] for r in grid[0]], dtype=torch.float64).log()
              for grid in grids.values()]  # (H, 2) each
    logit = [(r[:, 0] - r[:, 1]) for r in ratios]  # (H,)
    return float((logit[0] - logit[1]).abs().max())


def _reading(grid: list[list[HeadReading]], layer_head: tuple[int, int]) -> HeadReading:
    layer, head = layer_head
    return grid[layer - 1][head - 1]


def _summary(report: LabReport, encoded: dict, grids: dict, right: list, wrong: list) -> None:
    lines = []
    for key, grid in grids.items():
        cells = [r for row in grid for r in row]
        counts = {c: sum(r.category == c for r in cells) for c in CATEGORY_COLOURS}
        answers = sum(r.answer == EXPECTED[key] for r in cells)
        common = Counter(r.top_token for r in cells if r.category == "other").most_common(3)
        others = ", ".join(f"'{token}' {count}" for token, count in common)
        report.number(f"{key}_argmax_counts", counts)
        report.number(f"{key}_heads_answering_{EXPECTED[key]}", answers)
        lines.append(
            f"* **{key}** — {' '.join(encoded[key].tokens)}: 'it' attends most to 'animal' in "
            f"{counts['animal']} of {len(cells)} heads, to 'street' in {counts['street']}, to another "
            f"token in {counts['other']} (most often {others}); {answers} heads weigh '{EXPECTED[key]}' "
            "above the other noun."
        )
    fmt = ", ".join
    report.text(
        "\n".join(lines) + "\n\n"
        f"Heads whose answer (the larger of the weights on 'animal' and 'street') flips between the two "
        f"sentences: {len(right) + len(wrong)} of {sum(len(row) for row in grids['tired'])}; "
        f"**{len(right)} the right way** (animal with 'tired', street with 'wide'): "
        f"{fmt(f'L{layer}H{head}' for layer, head in right) or 'none'}; {len(wrong)} the wrong way: "
        f"{fmt(f'L{layer}H{head}' for layer, head in wrong) or 'none'}. The sentences differ only in "
        "the last word, so layer 1 scores 'animal' and 'street' identically in both and cannot flip. "
        "MiniLM is a small sentence encoder, not a coreference model: read these as measurements."
    )


def _flip_table(report: LabReport, grids: dict, flipped: list, right: list) -> None:
    rows = []
    for layer_head in flipped:
        a, b = (_reading(grid, layer_head) for grid in grids.values())
        way = "right" if layer_head in right else "wrong"
        rows.append([f"L{a.layer}H{a.head}", a.animal, a.street, b.animal, b.street, way])
    if rows:
        headers = ["head", "tired: w(animal)", "tired: w(street)", "wide: w(animal)", "wide: w(street)",
                   "way"]
        report.table(headers, rows, caption="The heads that flip, with their weights (small margins too):")


def _layer_table(report: LabReport, grids: dict) -> None:
    heads = len(grids["tired"][0])
    rows = []
    for key, grid in grids.items():
        for row in grid:
            rows.append([key, row[0].layer, *(f"{r.animal:.2f}/{r.street:.2f}" for r in row)])
    report.table(["sentence", "layer", *(f"head {h}" for h in range(1, heads + 1))], rows,
                 caption="Weight of 'it' on animal / street, every head:")


def _plot_grids(path: Path, grids: dict) -> Path:
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    from attnlab.visualize import printable, save_figure

    categories = list(CATEGORY_COLOURS)
    fig = Figure(figsize=(17, 8.5), layout="constrained")
    for ax, (key, grid) in zip(fig.subplots(2, 1), grids.items(), strict=True):
        codes = [[categories.index(r.category) for r in row] for row in grid]
        ax.imshow(codes, cmap=ListedColormap(list(CATEGORY_COLOURS.values())), vmin=0,
                  vmax=len(categories) - 1, aspect="auto")
        for row in grid:
            for r in row:
                ax.text(r.head - 1, r.layer - 1, f"{printable(r.top_token)}\n{r.top_weight:.2f}",
                        ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(grid[0])), labels=[f"head {h}" for h in range(1, len(grid[0]) + 1)])
        ax.set_yticks(range(len(grid)), labels=[f"layer {layer}" for layer in range(1, len(grid) + 1)])
        ax.set_title(f"'{SENTENCES[key]}': the key 'it' attends to most")
    handles = [Patch(color=c, label=f"'{k}'" if k != "other" else "another token")
               for k, c in CATEGORY_COLOURS.items()]
    fig.legend(handles=handles, loc="outside lower center", ncols=3)
    return save_figure(fig, path)


def _plot_candidates(path: Path, grids: dict, flipped: list[tuple[int, int]]) -> Path:
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    from attnlab.visualize import save_figure

    fig = Figure(figsize=(13, 4.2), layout="constrained")
    diffs = {key: torch.tensor([[r.animal - r.street for r in row] for row in grid])
             for key, grid in grids.items()}
    vmax = max(float(d.abs().max()) for d in diffs.values()) or 1.0
    for ax, (key, diff) in zip(fig.subplots(1, 2), diffs.items(), strict=True):
        image = ax.imshow(diff.numpy(), cmap="PuOr_r", vmin=-vmax, vmax=vmax, aspect="auto")
        for layer, head in flipped:
            ax.add_patch(Rectangle((head - 1.5, layer - 1.5), 1, 1, fill=False, lw=2, ec="k"))
        ax.set_xticks(range(diff.shape[1]), labels=[str(h) for h in range(1, diff.shape[1] + 1)])
        ax.set_yticks(range(diff.shape[0]), labels=[str(i) for i in range(1, diff.shape[0] + 1)])
        ax.set(xlabel="head", ylabel="layer", title=f"'... too {key}': w(animal) − w(street)")
    fig.colorbar(image, ax=fig.axes, label="> 0: more on 'animal'; < 0: more on 'street'")
    return save_figure(fig, path)
