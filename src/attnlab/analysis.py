"""FLOPs and attention-matrix memory of attnlab's Transformer models, layer by layer, and of the
recurrent and convolutional layers the lectures compare them with.

The rows of the lectures' complexity tables, made exact: self-attention for the Transformer,
GPT and BERT-style models attnlab has, and the recurrent and convolutional layers beside it
(:func:`layer_complexity`, below). Li (Transformer Part I), "Complexity of
Attention" (the score matrix ``S = QKᵀ`` costs O(n²d), the weighted sum ``softmax(S) V``
O(n²d), and the n × n scores take O(n²) memory per head); Hasegawa-Johnson (ECE 417 Lecture
21), "Why Self-Attention?" (O(n²d) per self-attention layer against O(nd²) per recurrent
layer); and Ba (CSC413 Lecture 8), "Computational Cost and Parallelism" (a Transformer costs
t²·k per layer to train and to test).

**Convention.** Matrix multiplications only, 2 FLOPs per multiply-add (an ``(m × k)·(k × n)``
product costs ``2mkn``) — the convention of ``torch.utils.flop_counter.FlopCounterMode``,
against which the tests check these counts. Biases, softmax, masking, norms, activations,
dropout, embedding lookups and positional encodings are left out: they are O(n·d) or
O(H·n²), lower order than the terms below. The causal mask does not halve anything: the
full ``n_q × n_k`` score matrix is computed, then masked.

Per sequence, for an attention with ``n_q`` queries, ``n_k`` keys, width ``d`` and ``H``
heads (``H · d_h = d``):

=====================  ===================  ======================
part                   FLOPs                order
=====================  ===================  ======================
Q, K, V projections    ``2 n_q d² + 4 n_k d²``  O(n d²)
scores ``QKᵀ``         ``2 n_q n_k d``      O(n² d)
weights · V            ``2 n_q n_k d``      O(n² d)
output projection      ``2 n_q d²``         O(n d²)
feed-forward           ``4 n d d_ff``       O(n d²)  (``6 n d d_ff`` for SwiGLU)
LM head                ``2 n d V``          O(n d V)
attention matrix       ``H n_q n_k`` numbers  O(H n²) memory
=====================  ===================  ======================

Self-attention has ``n_q = n_k = n``; the decoder's cross-attention has ``n_q = T`` target
and ``n_k = S`` source tokens. The fused attention path never stores the attention matrix
(its memory is O(n)); the explicit path (``return_weights=True``) does, once per layer.

Training (:func:`training_flops`) costs three forward passes: the backward pass of a product
``A·B`` computes two products of its size, ``G·Bᵀ`` and ``Aᵀ·G``. Decoding (:func:`decoding_flops`)
runs one forward pass a new token: with the KV cache only the new token is projected and it
attends to the cached keys (O(n·d + d²) a token); without it the whole prefix is computed again
(O(n·d² + n²·d) a token) — Ba (CSC413 Lecture 8), "Computational Cost and Parallelism": "the
computation in the self-attention decoder grows as the sequence gets longer".

The other layers of Hasegawa-Johnson's table (ECE 417 Lecture 21, "Why Self-Attention?";
Vaswani et al. 2017, Table 1), of width ``d`` on ``n`` positions (:func:`layer_complexity`):

==============  ======================  ===========  ==============================
layer           FLOPs                   sequential   path length, position 0 → n−1
==============  ======================  ===========  ==============================
recurrent       ``2 n g d (d_in + d)``  n            n steps
convolutional   ``2 n k d_in d``        1            ⌈log_k n⌉ layers dilated,
                                                     ⌈(n−1)/(k−1)⌉ contiguous
self-attention  ``8 n d² + 4 n² d``     4            1 layer
==============  ======================  ===========  ==============================

``g`` is the number of gates (1 for a plain RNN, 3 for a GRU, 4 for an LSTM). *Sequential*
counts the longest chain of matrix products each of which needs the one before it, which
no hardware can run side by side: a recurrent layer's n, one a step, each needing the state
the step before produced; a convolution's one; attention's projections → scores → weighted
values → output. The path length counts causal layers (convolutions padded on the left as in
ByteNet and WaveNet, layer ``i`` dilated by ``k^i``).
"""

from __future__ import annotations

from dataclasses import dataclass

from attnlab.models import EncoderConfig, GPTConfig, TransformerConfig
from attnlab.validation import check_choice, check_positive

PARTS = ("qkv", "scores", "weighted_values", "out_proj", "ffn", "lm_head")


@dataclass(frozen=True)
class AttentionCost:
    """FLOPs of one multi-head attention and the size of its attention matrix (whole batch)."""

    qkv: int
    scores: int
    weighted_values: int
    out_proj: int
    matrix_elements: int  # B · H · n_q · n_k

    @property
    def total(self) -> int:
        return self.qkv + self.scores + self.weighted_values + self.out_proj


@dataclass(frozen=True)
class LayerCost:
    """One layer: ``name`` is its module path (``"stack.encoder.layers.0"``, ``"decoder.layers.3"``)."""

    name: str
    self_attn: AttentionCost
    cross_attn: AttentionCost | None
    ffn: int

    @property
    def attentions(self) -> tuple[AttentionCost, ...]:
        return (self.self_attn,) if self.cross_attn is None else (self.self_attn, self.cross_attn)

    @property
    def total(self) -> int:
        return sum(a.total for a in self.attentions) + self.ffn


@dataclass(frozen=True)
class FlopReport:
    """Forward FLOPs of a model, per layer, plus the LM head (0 for :class:`Encoder`)."""

    layers: tuple[LayerCost, ...]
    lm_head: int

    @property
    def total(self) -> int:
        return sum(layer.total for layer in self.layers) + self.lm_head

    def by_part(self) -> dict[str, int]:
        """Totals per part (:data:`PARTS`) over all layers and attentions."""
        parts = dict.fromkeys(PARTS, 0)
        for layer in self.layers:
            for a in layer.attentions:
                for name in PARTS[:4]:
                    parts[name] += getattr(a, name)
            parts["ffn"] += layer.ffn
        parts["lm_head"] = self.lm_head
        return parts

    @property
    def attention_elements(self) -> int:
        """Numbers in the largest single attention matrix ``B·H·n_q·n_k`` (the explicit path's
        peak at inference; training keeps one per attention for the backward pass)."""
        return max(a.matrix_elements for layer in self.layers for a in layer.attentions)

    def table(self) -> str:
        """A plain-text table: one row per layer, FLOPs per part, then the totals."""
        rows = [f"{'layer':<22}" + "".join(f"{c:>12}" for c in ("qkv", "QKᵀ", "A·V", "out", "ffn"))
                + f"{'total':>14}"]
        for layer in self.layers:
            a = layer.attentions
            cells = [sum(getattr(x, p) for x in a) for p in PARTS[:4]] + [layer.ffn, layer.total]
            row = "".join(f"{c:>12,}" for c in cells[:-1])
            rows.append(f"{layer.name:<22}{row}{cells[-1]:>14,}")
        rows.append(f"{'lm_head':<22}{'':>60}{self.lm_head:>14,}")
        rows.append(f"{'total':<22}{'':>60}{self.total:>14,}")
        return "\n".join(rows)


def attention_cost(
    n_q: int, n_k: int, d: int, num_heads: int, batch_size: int = 1, *, new_keys: int | None = None,
    kv_width: int | None = None,
) -> AttentionCost:
    """FLOPs of multi-head attention from ``n_q`` queries to ``n_k`` keys of width ``d``.

    ``new_keys``: keys and values this call projects (default ``n_k``); with a KV cache only
    the new tokens' are, the others are read from the cache. ``kv_width``: the width of the keys
    and values, ``H_kv · d_h`` (default ``d``; smaller with grouped-query heads, whose scores
    and weighted values cost the same as multi-head attention's)."""
    b, m, kv = batch_size, n_k if new_keys is None else new_keys, d if kv_width is None else kv_width
    return AttentionCost(
        qkv=2 * b * (n_q * d * d + 2 * m * d * kv),  # X W_q, M W_k, M W_v
        scores=2 * b * n_q * n_k * d,  # Q Kᵀ over all heads: H · (n_q × d_h)·(d_h × n_k)
        weighted_values=2 * b * n_q * n_k * d,  # softmax(S) V: H · (n_q × n_k)·(n_k × d_h)
        out_proj=2 * b * n_q * d * d,  # [H_1 … H_H] W_o
        matrix_elements=b * num_heads * n_q * n_k,
    )


def ffn_cost(n: int, d: int, d_ff: int, activation: str, batch_size: int = 1) -> int:
    """FLOPs of the position-wise feed-forward on ``n`` tokens (SwiGLU has three matrices)."""
    matrices = 3 if activation == "swiglu" else 2
    return 2 * batch_size * n * d * d_ff * matrices


def flops(
    config: TransformerConfig | GPTConfig | EncoderConfig, seq_len: int | tuple[int, int],
    *, batch_size: int = 1,
) -> FlopReport:
    """Forward-pass FLOPs of the model ``config`` describes, per layer (see module docstring).

    ``seq_len``: tokens per sequence; for a :class:`TransformerConfig` an int (source =
    target length) or ``(S, T)``. Counts the model's ``forward``: :class:`~attnlab.models.GPT`
    and :class:`~attnlab.models.Transformer` end with the LM head over every position;
    :class:`~attnlab.models.Encoder` returns token states (no head; pooling is O(n·d)).
    """
    if not isinstance(config, TransformerConfig | GPTConfig | EncoderConfig):
        raise TypeError(
            "config must be a TransformerConfig, GPTConfig or EncoderConfig, "
            f"got {type(config).__name__}"
        )
    check_positive("batch_size", batch_size)
    b, d = batch_size, config.d_model
    if isinstance(config, TransformerConfig):
        src, tgt = (seq_len, seq_len) if isinstance(seq_len, int) else tuple(seq_len)
        _check_lengths(src, tgt)
        encoder = _layers("stack.encoder.layers", config.num_encoder_layers, src, None, config, b)
        decoder = _layers("stack.decoder.layers", config.num_decoder_layers, tgt, src, config, b)
        return FlopReport(encoder + decoder, 2 * b * tgt * d * config.tgt_vocab_size)
    if not isinstance(seq_len, int):
        raise ValueError(f"seq_len must be an int for {type(config).__name__}, got {seq_len!r}")
    _check_lengths(seq_len)
    if isinstance(config, GPTConfig):
        layers = _layers("decoder.layers", config.num_layers, seq_len, None, config, b)
        return FlopReport(layers, 2 * b * seq_len * d * config.vocab_size)
    return FlopReport(_layers("encoder.layers", config.num_layers, seq_len, None, config, b), 0)


def attention_memory(
    config: TransformerConfig | GPTConfig | EncoderConfig, seq_len: int | tuple[int, int],
    *, batch_size: int = 1, bytes_per_element: int = 4,
) -> int:
    """Bytes of the largest attention matrix ``B · H · n_q · n_k`` (O(H n²), Li (Transformer Part I))."""
    check_positive("bytes_per_element", bytes_per_element)
    return flops(config, seq_len, batch_size=batch_size).attention_elements * bytes_per_element


def training_flops(
    config: TransformerConfig | GPTConfig | EncoderConfig, seq_len: int | tuple[int, int],
    *, batch_size: int = 1,
) -> int:
    """FLOPs of one training step (forward + backward) on ``batch_size`` sequences: three forward
    passes, since the backward of every product ``A·B`` computes ``G·Bᵀ`` and ``Aᵀ·G``."""
    return 3 * flops(config, seq_len, batch_size=batch_size).total


def decoding_flops(
    config: GPTConfig, prompt_len: int, new_tokens: int, *, use_cache: bool = True, batch_size: int = 1,
) -> int:
    """FLOPs of generating ``new_tokens`` after ``prompt_len`` prompt tokens, one forward pass a
    token, as :func:`attnlab.generation.greedy_search` runs them (Ba (CSC413 Lecture 8),
    "Computational Cost and Parallelism").

    Step ``i`` sees ``prompt_len + i`` tokens. With ``use_cache`` the first step encodes the
    prompt and every later step feeds one token against the cached keys; without it every step
    runs the whole prefix again. The context must fit ``block_size`` (no sliding window)."""
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    for name, value in (("prompt_len", prompt_len), ("new_tokens", new_tokens), ("batch_size", batch_size)):
        check_positive(name, value)
    if prompt_len + new_tokens - 1 > config.block_size:
        raise ValueError(
            f"prompt_len + new_tokens - 1 must be <= block_size={config.block_size} (the window would "
            f"slide), got {prompt_len} + {new_tokens} - 1"
        )
    total = 0
    for step in range(new_tokens):
        context = prompt_len + step
        new = 1 if use_cache and step > 0 else context
        total += _decoder_forward(config, new, context, batch_size)
    return total


def kv_cache_bytes(config: GPTConfig, tokens: int, *, batch_size: int = 1, bytes_per_element: int = 4) -> int:
    """Bytes of a GPT's KV cache holding ``tokens`` positions of ``batch_size`` rows: every layer
    keeps a key and a value of ``H_kv · d_h`` numbers a token, ``L · 2 · H_kv · d_h`` in all —
    ``H_kv = H`` for multi-head attention, fewer with grouped-query attention (Ainslie et al.
    2023, "GQA"; ``H_kv = 1``: Shazeer 2019, multi-query). SmolLM2-135M: 30 · 2 · 3 · 64 · 4 B =
    46,080 bytes a token in float32, against 138,240 with one key/value head per query head."""
    if not isinstance(config, GPTConfig):
        raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
    for name, value in (("tokens", tokens), ("batch_size", batch_size)):
        check_positive(name, value)
    check_positive("bytes_per_element", bytes_per_element)
    kv_heads = config.num_kv_heads or config.num_heads
    return config.num_layers * 2 * kv_heads * config.head_dim * bytes_per_element * tokens * batch_size


def _decoder_forward(config: GPTConfig, new: int, context: int, batch_size: int) -> int:
    """A GPT forward pass over ``new`` tokens whose keys end a context of ``context`` tokens, the
    output layer on the last position alone (``GPT.forward(last_only=True)``, as decoding runs it)."""
    d = config.d_model
    attn = attention_cost(new, context, d, config.num_heads, batch_size, new_keys=new,
                          kv_width=_kv_width(config))
    ffn = ffn_cost(new, d, config.ffn_dim, config.activation, batch_size)
    return config.num_layers * (attn.total + ffn) + 2 * batch_size * d * config.vocab_size  # last logits


# ------------------------------------------------- the recurrent and convolutional rows
GATES = {"rnn": 1, "gru": 3, "lstm": 4}
LAYER_TYPES = ("recurrent", "convolutional", "self-attention")


def recurrent_flops(
    n: int, d_in: int, d_hidden: int, *, cell: str = "gru", num_layers: int = 1, batch_size: int = 1
) -> int:
    """FLOPs of a recurrent layer (``torch.nn.RNN`` / ``GRU`` / ``LSTM``) over ``n`` steps: each
    step multiplies the input by ``W_i`` (``g·d_h × d_in``) and the previous state by ``W_h``
    (``g·d_h × d_h``). O(n d²) (Hasegawa-Johnson (ECE 417 Lecture 21), "Why Self-Attention?");
    ``t × k² × d`` for ``d`` layers of ``k`` units (Ba (CSC413 Lecture 8), "Computational Cost
    and Parallelism")."""
    check_choice("cell", cell, tuple(GATES))
    for name, value in (("n", n), ("d_in", d_in), ("d_hidden", d_hidden), ("num_layers", num_layers),
                        ("batch_size", batch_size)):
        check_positive(name, value)
    widths = [d_in] + [d_hidden] * (num_layers - 1)  # layer l > 0 reads the layer below
    return sum(2 * batch_size * n * GATES[cell] * d_hidden * (w + d_hidden) for w in widths)


def convolution_flops(n: int, d_in: int, d_out: int, kernel_size: int, *, batch_size: int = 1) -> int:
    """FLOPs of a 1-D convolution (``torch.nn.Conv1d``, stride 1) producing ``n`` positions:
    ``2 n k d_in d_out``, O(k n d²) (Hasegawa-Johnson (ECE 417 Lecture 21), "Why Self-Attention?")."""
    for name, value in (("n", n), ("d_in", d_in), ("d_out", d_out), ("kernel_size", kernel_size),
                        ("batch_size", batch_size)):
        check_positive(name, value)
    return 2 * batch_size * n * kernel_size * d_in * d_out


@dataclass(frozen=True)
class LayerComplexity:
    """One row of Hasegawa-Johnson's "Why Self-Attention?" table (module docstring), counted."""

    layer: str  # one of LAYER_TYPES
    flops: int  # forward FLOPs of one layer on n positions
    sequential_ops: int  # longest chain of dependent matrix products
    path_length: int  # layers (recurrent: steps) from input position 0 to output n − 1


def layer_complexity(
    layer: str, n: int, d: int, *, kernel_size: int = 3, dilated: bool = True, num_heads: int = 1,
    cell: str = "gru",
) -> LayerComplexity:
    """The ``layer`` row for width ``d`` on ``n`` positions: a recurrent ``cell``, a convolution
    of ``kernel_size`` (``dilated`` or contiguous) or self-attention of ``num_heads`` heads."""
    check_choice("layer", layer, LAYER_TYPES)
    check_positive("n", n)
    check_positive("d", d)
    if layer == "recurrent":
        return LayerComplexity(layer, recurrent_flops(n, d, d, cell=cell), n, n)
    if layer == "self-attention":
        return LayerComplexity(layer, attention_cost(n, n, d, num_heads).total, 4, 1)
    if kernel_size < 2:
        raise ValueError(f"kernel_size must be >= 2 to connect positions, got {kernel_size}")
    return LayerComplexity(layer, convolution_flops(n, d, d, kernel_size), 1,
                           convolution_path_length(n, kernel_size, dilated=dilated))


def convolution_path_length(n: int, kernel_size: int, *, dilated: bool = True) -> int:
    """Causal layers of width ``k`` until output ``n − 1`` sees input 0: ``⌈(n−1)/(k−1)⌉``
    contiguous (each layer reaches ``k − 1`` further back), ``⌈log_k n⌉`` dilated by ``k^i``
    (``L`` layers reach ``k^L − 1`` back)."""
    if not dilated:
        return -(-(n - 1) // (kernel_size - 1))
    layers = 0
    while kernel_size**layers < n:
        layers += 1
    return layers


def _layers(
    prefix: str, count: int, n: int, memory_len: int | None, config, batch_size: int
) -> tuple[LayerCost, ...]:
    d, h, kv = config.d_model, config.num_heads, _kv_width(config)
    self_attn = attention_cost(n, n, d, h, batch_size, kv_width=kv)
    cross = None if memory_len is None else attention_cost(n, memory_len, d, h, batch_size, kv_width=kv)
    ffn = ffn_cost(n, d, config.ffn_dim, config.activation, batch_size)
    return tuple(LayerCost(f"{prefix}.{i}", self_attn, cross, ffn) for i in range(count))


def _kv_width(config) -> int:
    """``H_kv · d_h``: the keys' and values' width (grouped-query heads: fewer than ``H``)."""
    return (config.num_kv_heads or config.num_heads) * config.head_dim


def _check_lengths(*lengths: int) -> None:
    for n in lengths:
        if not isinstance(n, int) or n <= 0:
            raise ValueError(f"seq_len must be a positive int (or (S, T) pair), got {n!r}")
