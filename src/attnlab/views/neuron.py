"""bertviz's neuron view: where one attention weight comes from, dimension by dimension.

Vaswani et al. 2017, "Attention Is All You Need", eq. 1: head ``h`` weighs key ``j`` for query
``i`` by ``softmax_j(q_i · k_j / √d_h)``, and ``q_i · k_j = Σ_d q_id k_jd`` — Vig 2019, "A
Multiscale Visualization of Attention in the Transformer Model" (the neuron view) draws the
terms ``q_id k_jd``, so a reader sees which dimensions make a key win.

:func:`queries_and_keys` reads ``q`` and ``k`` ``(L, H, n, d_h)`` out of a model with a forward
hook on each :class:`~attnlab.attention.MultiHeadAttention` (the model itself is not changed):
from the layer's input ``x`` the hook projects the queries and keys with the layer's own weights
(``in_proj``, or ``q_proj`` / ``k_proj``), rotates them as the layer does (its ``rotary``, RoPE:
Su et al. 2021) and repeats a grouped-query layer's shared keys over its heads (Ainslie et al.
2023), so ``softmax(q kᵀ/√d_h)`` (masked) is the model's own weights
(``tests/views/test_neuron.py``). A model with a distance bias (ALiBi, relative positions) adds
it after ``q · k``: its neuron view shows the scores without that bias.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from attnlab.attention.multihead import MultiHeadAttention
from attnlab.generation.state import inference
from attnlab.pipelines import EncoderPipeline, LanguageModelPipeline
from attnlab.views.encode import as_tensor, float32_base64, token_labels
from attnlab.views.html import View
from attnlab.views.pictures import neuron_figure


@dataclass
class QueryKeys:
    """Every self-attention layer's queries and keys over one text: ``q``, ``k`` ``(L, H, n, d_h)``
    (after the rotary embedding; a grouped-query layer's keys repeated over its heads), the ``n``
    ``tokens``, and whether the model attends only backwards (``causal``)."""

    tokens: list[str]
    q: Tensor
    k: Tensor
    causal: bool

    def view(self, layer: int = -1, head: int = 0, *, query: int | None = None) -> NeuronView:
        """:func:`neuron_view` of ``layer``'s ``head``."""
        return neuron_view(self.tokens, self.q, self.k, layer, head, query=query, causal=self.causal)


def _project(module: MultiHeadAttention, x: Tensor) -> tuple[Tensor, Tensor]:
    """The self-attention queries ``(B, H, n, d_h)`` and keys ``(B, H, n, d_h)`` ``module`` makes of ``x``."""
    d, kv, heads, d_h = module.d_model, module.kv_dim, module.num_heads, module.head_dim
    if hasattr(module, "in_proj"):
        weight, bias = module.in_proj.weight, module.in_proj.bias
        q = nn.functional.linear(x, weight[:d], None if bias is None else bias[:d])
        k = nn.functional.linear(x, weight[d:d + kv], None if bias is None else bias[d:d + kv])
    else:
        q, k = module.q_proj(x), module.k_proj(x)
    b, n, _ = x.shape
    q = q.view(b, n, heads, d_h).transpose(1, 2)
    k = k.view(b, n, kv // d_h, d_h).transpose(1, 2)
    if module.rotary is not None:
        q, k = module.rotary(q, k, 0)
    return q, k.repeat_interleave(heads // (kv // d_h), dim=1)


def _self_attention_layers(model: nn.Module) -> list[MultiHeadAttention]:
    """The self-attention layers of ``model``, in order (a decoder's cross-attention left out)."""
    found = [m for name, m in model.named_modules()
             if isinstance(m, MultiHeadAttention) and not name.endswith("cross_attn")]
    if not found:
        raise ValueError(f"{type(model).__name__} has no MultiHeadAttention layer: it has no queries and "
                         "keys to show")
    return found


def _read(model: nn.Module, run: Any) -> tuple[Tensor, Tensor]:
    """Run ``run()`` with a hook on every self-attention layer of ``model``; returns ``q``, ``k``
    ``(L, H, n, d_h)``."""
    seen: list[tuple[Tensor, Tensor]] = []

    def hook(module: MultiHeadAttention, args: tuple, kwargs: dict, _output: Any) -> None:
        x = args[0]
        if (len(args) > 1 and args[1] is not None) or kwargs.get("memory") is not None:
            return  # cross-attention: not a self-attention layer's queries and keys
        q, k = _project(module, x)
        seen.append((q[0].float().cpu(), k[0].float().cpu()))

    hooks = [layer.register_forward_hook(hook, with_kwargs=True) for layer in _self_attention_layers(model)]
    try:
        with inference(model):
            run()
    finally:
        for handle in hooks:
            handle.remove()
    return torch.stack([q for q, _ in seen]), torch.stack([k for _, k in seen])


def queries_and_keys(pipeline: LanguageModelPipeline | EncoderPipeline, text: str) -> QueryKeys:
    """Every self-attention layer's ``q`` and ``k`` while ``pipeline``'s model reads ``text``
    (a language model: its last ``block_size`` tokens, causal; an encoder: one sentence's word
    pieces, bidirectional), read by forward hooks (the module docstring says how)."""
    if isinstance(pipeline, LanguageModelPipeline):
        ids = pipeline.prompt_ids(text, "text")[-pipeline.model.config.block_size:]
        batch = torch.tensor([ids], device=pipeline.device)
        q, k = _read(pipeline.model, lambda: pipeline.model(batch))
        return QueryKeys(pipeline.tokenizer.token_strings(ids), q, k, causal=True)
    if isinstance(pipeline, EncoderPipeline):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"text must be a non-empty string, got {text!r}")
        batch = {key: value.to(pipeline.device) for key, value in pipeline.tokenize([text]).items()}
        q, k = _read(pipeline.model, lambda: pipeline.model(**batch))
        tokens = [pipeline.tokenizer.id_to_token(int(i)) for i in batch["input_ids"][0]]
        return QueryKeys(tokens, q, k, causal=False)
    raise TypeError(f"queries_and_keys takes a LanguageModelPipeline or an EncoderPipeline, got "
                    f"{type(pipeline).__name__}")


class NeuronView(View):
    """One head's queries and keys ``(n, d_h)``: the view picks a query and shows its products."""

    kind = "neuron"

    def __init__(self, tokens: list[str], q: Tensor, k: Tensor, layer: int, head: int, query: int,
                 causal: bool, title: str | None) -> None:
        self.tokens, self.q, self.k, self.layer, self.head = tokens, q, k, layer, head
        self.query, self.causal, self.title = query, causal, title

    def data(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "d": self.q.shape[-1], "q": float32_base64(self.q),
                "k": float32_base64(self.k), "causal": self.causal, "layer": self.layer, "head": self.head,
                "query": self.query}

    def scores(self, query: int) -> tuple[Tensor, Tensor]:
        """The keys query ``query`` sees ``(m, d_h)`` and its softmax over them ``(m,)``."""
        keys = self.k[:query + 1] if self.causal else self.k
        scores = keys.double() @ self.q[query].double() / self.q.shape[-1] ** 0.5
        return keys, torch.softmax(scores, dim=0).float()

    def figure(self) -> Any:
        keys, weights = self.scores(self.query)
        token = self.tokens[self.query]
        where = f"layer {self.layer + 1}, head {self.head + 1}, query {self.query + 1} “{token}”"
        title = " · ".join(part for part in (self.title, where) if part)
        return neuron_figure(self.q[self.query], keys, self.tokens[:len(keys)], weights, title=title)


def _pick(values: Any, name: str, layer: int, head: int) -> tuple[Tensor, int, int]:
    tensor = as_tensor(values, name)
    if tensor.dim() != 4:
        raise ValueError(f"{name} must be (L, H, n, d_h), got shape {tuple(tensor.shape)}")
    layers, heads = tensor.shape[:2]
    if not (isinstance(layer, int) and -layers <= layer < layers):
        raise ValueError(f"layer must be an integer in [-{layers}, {layers - 1}], got {layer!r}")
    if not (isinstance(head, int) and -heads <= head < heads):
        raise ValueError(f"head must be an integer in [-{heads}, {heads - 1}], got {head!r}")
    return tensor[layer, head], layer % layers, head % heads


def neuron_view(tokens: Sequence[Any], q: Any, k: Any, layer: int = -1, head: int = 0, *,
                query: int | None = None, causal: bool = False, title: str | None = None) -> NeuronView:
    """bertviz's neuron view of ``layer``'s ``head``: ``q``, ``k`` ``(L, H, n, d_h)`` (as
    :func:`queries_and_keys` returns them) over ``tokens``; pick a query (first: ``query``,
    default the last) to see each key's ``k``, the products ``q_d k_d``, ``q·k/√d_h`` and the
    softmax (over the keys up to the query when ``causal``)."""
    q_head, layer, head = _pick(q, "q", layer, head)
    k_head, _, _ = _pick(k, "k", layer, head)
    if q_head.shape != k_head.shape:
        raise ValueError(f"q and k must have the same shape, got {tuple(q_head.shape)} and "
                         f"{tuple(k_head.shape)}")
    n = q_head.shape[0]
    labels = token_labels(tokens, n, "tokens", "positions")
    query = n - 1 if query is None else query
    if not (isinstance(query, int) and 0 <= query < n):
        raise ValueError(f"query must be an integer in [0, {n - 1}], got {query!r}")
    return NeuronView(labels, q_head, k_head, layer, head, query, bool(causal), title)
