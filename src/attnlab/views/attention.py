"""Token-to-token attention in a notebook: the heatmap, the alignment, bertviz's model and head views.

Weights are ``(n_q, n_k)``, ``(H, n_q, n_k)`` or ``(L, H, n_q, n_k)``: rows the queries, columns
the keys, each row a softmax (self-attention ``n_q = n_k``; a causal model's zeros above the
diagonal are found and drawn grey, never sent).

* :func:`heatmap` — one matrix at a time, any layer and head or the mean of a layer's heads
  (Steinert-Threlkeld (Transformers I), "Attention visualisation"; Ba (CSC413 Lecture 8));
* :func:`alignment` — a translator's encoder-decoder attention, source across, target down, grey
  levels (white = 1): Bahdanau, Cho & Bengio 2015, "Neural Machine Translation by Jointly
  Learning to Align and Translate", Figure 3;
* :func:`model_view` — every layer × head as a thumbnail, the one clicked in full (Vig 2019, "A
  Multiscale Visualization of Attention in the Transformer Model": the model view);
* :func:`head_view` — Vig's head view: the tokens twice, a line from each query to each key, its
  opacity the weight, one colour a head, hover a token to see its lines alone.

Each draws lazily: the page inflates and draws one head (the head view: one layer) when it is
picked, so 512 tokens × 30 layers × 9 heads stay responsive (``benchmarks/views.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attnlab.views.encode import attention_payload, attention_weights, token_labels, with_mean_head
from attnlab.views.html import View
from attnlab.views.pictures import atlas_figure, lines_figure, matrix_figure

LABELLED_UP_TO = 48  # tokens a side drawn with their labels (beyond: hover for them)


def _index(value: int, count: int, name: str) -> int:
    if not isinstance(value, int) or not -count <= value < count:
        raise ValueError(f"{name} must be an integer in [-{count}, {count - 1}], got {value!r}")
    return value % count


class AttentionView(View):
    """Attention weights ``(L, H, n_q, n_k)`` over query ``tokens`` and key ``keys`` (``None``:
    self-attention, the keys are the tokens), drawn by ``views.js``'s ``kind``."""

    def __init__(self, kind: str, weights: Any, tokens: Sequence[Any] | None, keys: Sequence[Any] | None, *,
                 title: str | None, layer: int = -1, head: int | str = 0, mean: bool = False,
                 options: dict[str, Any] | None = None, axes: tuple[str, str] = ("query", "key"),
                 names: tuple[str, str] = ("tokens", "keys")) -> None:
        self.kind, self.title, self.axes = kind, title, axes
        self.weights = attention_weights(weights)
        layers, heads, n_q, n_k = self.weights.shape
        self.layer = _index(layer, layers, "layer")
        if head == "mean":
            self.head = heads if (mean and heads > 1) else 0
        else:
            self.head = _index(head, heads, "head")
        self.mean, self.options = mean, dict(options or {})
        if self.options.get("scale") is None:  # linear while every cell is big enough to read, log beyond
            self.options["scale"] = "linear" if max(n_q, n_k) <= LABELLED_UP_TO else "log"
        if keys is None:
            self.tokens = token_labels(tokens, n_q, names[0], "queries (rows)")
            if n_q != n_k:
                raise ValueError(f"self-attention weights must be square, got {n_q} queries × {n_k} keys: "
                                 "give the keys' labels too")
            self.keys: list[str] | None = None
        else:
            self.tokens = token_labels(tokens, n_q, names[0], "queries (rows)")
            self.keys = token_labels(keys, n_k, names[1], "keys (columns)")

    def drawn(self) -> tuple[Any, list[str]]:
        """The weights as drawn (a last mean head when :attr:`mean`) and the heads' labels."""
        if self.mean:
            return with_mean_head(self.weights)
        return self.weights, [str(h + 1) for h in range(self.weights.shape[1])]

    def data(self) -> dict[str, Any]:
        weights, labels = self.drawn()
        payload = attention_payload(weights, self.tokens, self.keys, head_labels=labels)
        return {**payload, **self.options, "layer": self.layer, "head": self.head, "axes": list(self.axes)}

    def figure(self) -> Any:
        weights, labels = self.drawn()
        keys = self.keys if self.keys is not None else self.tokens
        layers = weights.shape[0]
        where = (f"layer {self.layer + 1} of {layers}, " if layers > 1 else "") + (
            f"head {labels[self.head]}" if len(labels) > 1 else "")
        if self.kind == "lines":
            title = self._titled(f"layer {self.layer + 1}")
            return lines_figure(weights[self.layer], self.tokens, keys, title=title)
        if self.options.get("grid") is not False and weights.shape[0] * weights.shape[1] > 1:
            return atlas_figure(weights, labels, title=self._titled("every layer × head"))
        labelled = max(len(self.tokens), len(keys)) <= LABELLED_UP_TO
        return matrix_figure(
            weights[self.layer, self.head], keys if labelled else None, self.tokens if labelled else None,
            title=self._titled(where), grey=self.options.get("palette") == "grey", axes=self.axes[::-1])

    def _titled(self, where: str) -> str:
        return " · ".join(part for part in (self.title, where) if part)


def heatmap(weights: Any, x_labels: Sequence[Any] | None = None, y_labels: Sequence[Any] | None = None, *,
            title: str | None = None, layer: int = -1, head: int | str = "mean", scale: str | None = None,
            ) -> AttentionView:
    """Token-to-token attention ``weights`` — ``(n_q, n_k)``, ``(H, n_q, n_k)`` or ``(L, H, n_q,
    n_k)`` — as a heatmap, keys (``x_labels``) across, queries (``y_labels``; default the
    ``x_labels``: self-attention) down; a layer and a head, or the mean of the layer's heads, to
    pick (first: ``layer``, ``head``, default the last layer's mean). ``scale``: ``"log"``,
    ``"sqrt"``, ``"linear"`` or ``"row"`` (default: linear up to 48 tokens, log beyond)."""
    self_attention = y_labels is None or (x_labels is not None and list(x_labels) == list(y_labels))
    if scale not in (None, "log", "sqrt", "linear", "row"):
        raise ValueError(f"scale must be 'log', 'sqrt', 'linear' or 'row', got {scale!r}")
    options = {"grid": False, "scale": scale}
    if self_attention:
        return AttentionView("map", weights, x_labels, None, title=title, layer=layer, head=head, mean=True,
                             options=options, names=("x_labels", ""))
    return AttentionView("map", weights, y_labels, x_labels, title=title, layer=layer, head=head, mean=True,
                         options=options, names=("y_labels", "x_labels"))


def alignment(weights: Any, src_tokens: Sequence[Any], tgt_tokens: Sequence[Any], *, title: str | None = None,
              layer: int = -1) -> AttentionView:
    """A translation's alignment, Bahdanau et al.'s Figure 3: ``weights`` ``(T, S)`` (an RNN
    decoder's) or ``(L, H, T, S)`` (a Transformer's cross-attention: a layer and a head, or
    their mean, to pick), source subwords across, target subwords down, black 0 to white 1."""
    options = {"grid": False, "scale": "linear", "palette": "grey"}
    return AttentionView("map", weights, tgt_tokens, src_tokens, title=title, layer=layer, head="mean",
                         mean=True, options=options, axes=("target", "source"),
                         names=("tgt_tokens", "src_tokens"))


def model_view(tokens: Sequence[Any], weights: Any, *, title: str | None = None, layer: int = -1,
               head: int = 0) -> AttentionView:
    """Every head of self-attention ``weights`` ``(L, H, n, n)`` over ``tokens`` at a glance
    (layers down, heads across, each a thumbnail), and the one clicked (or moved to with the
    arrow keys) in full; ``layer``, ``head`` first."""
    return AttentionView("map", weights, tokens, None, title=title, layer=layer, head=head)


def head_view(tokens: Sequence[Any], weights: Any, *, title: str | None = None,
              layer: int = -1) -> AttentionView:
    """bertviz's head view of ``weights`` ``(L, H, n, n)`` over ``tokens``: a layer to pick
    (first: ``layer``), a colour a head (click one to hide it, double-click to see it alone),
    a line from each query (left) to each key (right) as opaque as its weight (weights below
    0.01 undrawn); hover a token for its lines alone."""
    return AttentionView("lines", weights, tokens, None, title=title, layer=layer)
