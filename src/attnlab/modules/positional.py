"""Positional information: absolute encodings, rotary embeddings and distance biases.

Self-attention is permutation-equivariant, so order must be injected (Steinert-Threlkeld
(Transformers I), "Representing Order"; Ba (CSC413 Lecture 8), "Positional Encoding"). Three
families, one config string (:data:`POSITIONAL_KINDS`) chooses among them through
:class:`PositionalScheme`:

* added to the token embeddings, ``x_i = E_{w_i} + P_i`` (Steinert-Threlkeld
  (Transformers I)): fixed :class:`SinusoidalPositionalEncoding` or
  :class:`LearnedPositionalEmbedding`;
* rotating queries and keys so that ``q·k`` depends on ``m - n`` only:
  :class:`RotaryEmbedding` (RoPE, Su et al. 2021);
* an additive bias on the attention scores that depends on distance (Steinert-Threlkeld
  (Transformers I), "Fancier ways of representing positional info"): the fixed
  :class:`ALiBi` (Press et al. 2022) and the learned :class:`RelativePositionBias` (T5,
  Raffel et al. 2020).

Every module takes an ``offset``: the number of positions already in a KV cache, so that
incremental decoding sees exactly the positions the full forward pass sees.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnlab.config import Config
from attnlab.modules.rotary import RotaryEmbedding
from attnlab.validation import check_choice, check_positive, check_rank

POSITIONAL_KINDS = ("sinusoidal", "learned", "rope", "alibi", "relative", "none")

__all__ = [
    "ALiBi",
    "LearnedPositionalEmbedding",
    "POSITIONAL_KINDS",
    "PositionalConfig",
    "PositionalScheme",
    "RelativePositionBias",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "alibi_slopes",
    "relative_position_bucket",
]


def _positions(n: int, offset: int, device: torch.device | None) -> Tensor:
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    return torch.arange(offset, offset + n, device=device)  # (n,)


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoids (Ba (CSC413 Lecture 8) "Positional Encoding"; Vaswani et al. §3.5).

    ``PE(pos, 2i) = sin(pos / 10000^{2i/d})`` and ``PE(pos, 2i+1) = cos(pos / 10000^{2i/d})``.
    The table is a non-persistent buffer computed in float64 and grown on demand, so any
    length works and checkpoints do not store it. ``forward(x, offset)`` adds rows
    ``offset .. offset+n-1`` to ``x`` ``(B, n, d)``.
    """

    def __init__(self, d_model: int, max_len: int | None = None) -> None:
        super().__init__()
        check_positive("d_model", d_model)
        self.d_model = d_model
        self.register_buffer("pe", self.table(max_len or 512).float(), persistent=False)  # (L, d)

    def table(self, n: int, offset: int = 0) -> Tensor:
        """The formula in float64: rows ``offset .. offset+n-1``, shape ``(n, d_model)`` (on the
        meta device, where a model is only measured, the shape alone: :mod:`attnlab.memory`)."""
        if torch.get_default_device().type == "meta":
            return torch.empty(n, self.d_model, dtype=torch.float64)
        pos = _positions(n, offset, None).double()[:, None]  # (n, 1)
        two_i = torch.arange(0, self.d_model, 2, dtype=torch.float64)  # (⌈d/2⌉,)
        angle = pos / torch.pow(10000.0, two_i / self.d_model)  # (n, ⌈d/2⌉)
        pe = torch.empty(n, self.d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle[:, : self.d_model // 2])
        return pe

    def _grow(self, length: int) -> None:
        new = max(length, 2 * self.pe.shape[0])
        with torch.inference_mode(False):  # a table grown while decoding must still serve training
            self.pe = self.table(new).to(device=self.pe.device, dtype=self.pe.dtype)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """``x`` ``(B, n, d)`` → ``x + PE[offset:offset+n]`` ``(B, n, d)``."""
        check_rank("x", x, 3, "(B, n, d_model)")
        n = x.shape[1]
        if offset + n > self.pe.shape[0]:
            self._grow(offset + n)
        return x + self.pe[offset : offset + n].to(x.dtype)  # (B, n, d)


class LearnedPositionalEmbedding(nn.Module):
    """One learned vector per position (Steinert-Threlkeld (Transformers I), "Fixed vs Learned
    Positional Encoding").

    Cannot extrapolate: a sequence reaching past ``max_len`` raises ``ValueError``.
    """

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        check_positive("max_len", max_len)
        check_positive("d_model", d_model)
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)  # (L, d)
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """``x`` ``(B, n, d)`` → ``x + P[offset:offset+n]`` ``(B, n, d)``."""
        check_rank("x", x, 3, "(B, n, d_model)")
        n = x.shape[1]
        if offset + n > self.max_len:
            raise ValueError(
                f"sequence length {offset + n} (offset {offset} + {n} new positions) exceeds "
                f"max_len={self.max_len} of the learned positional embedding"
            )
        return x + self.embedding.weight[offset : offset + n]  # (B, n, d): rows P[offset:offset+n]


def alibi_slopes(num_heads: int) -> list[float]:
    """The ALiBi paper's head slopes (Press et al. 2022, §3 and its reference code).

    For ``H`` a power of two: the geometric sequence ``2^{-8/H}, 2^{-16/H}, …, 2^{-8}``.
    Otherwise: the slopes of the largest power of two ``P < H``, followed by every other
    slope of ``2P`` heads (the in-between values) until there are ``H``.
    """
    check_positive("num_heads", num_heads)

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    p = 2 ** int(math.floor(math.log2(num_heads)))
    if p == num_heads:
        return power_of_two(p)
    return power_of_two(p) + alibi_slopes(2 * p)[0::2][: num_heads - p]


class ALiBi(nn.Module):
    """Attention with Linear Biases (Press et al. 2022): a fixed distance bias
    (Steinert-Threlkeld (Transformers I)).

    Head ``h`` adds ``-m_h · |i - j|`` to the score of query ``i`` and key ``j``; no
    positional embedding is added to tokens. Under a causal mask this is the paper's
    ``m · [-(i-1), …, -1, 0]``; without one it penalises distance symmetrically.
    """

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        slopes = torch.tensor(alibi_slopes(num_heads), dtype=torch.float32)
        self.register_buffer("slopes", slopes, persistent=False)  # (H,)

    def forward(self, n_q: int, n_k: int, offset: int | None = None) -> Tensor:
        """Bias ``(H, n_q, n_k)``; query ``i`` at ``offset + i`` (default ``n_k - n_q``)."""
        offset = n_k - n_q if offset is None else offset
        dist = _distance(n_q, n_k, offset, self.slopes.device).abs()  # (n_q, n_k)
        return -self.slopes[:, None, None] * dist  # (H, n_q, n_k)


def _distance(n_q: int, n_k: int, offset: int, device: torch.device) -> Tensor:
    """``key position - query position`` ``(n_q, n_k)``, queries at ``offset .. offset+n_q-1``."""
    q_pos = _positions(n_q, offset, device)  # (n_q,)
    k_pos = torch.arange(n_k, device=device)  # (n_k,)
    return k_pos[None, :] - q_pos[:, None]  # (n_q, n_k)


def relative_position_bucket(
    relative_position: Tensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> Tensor:
    """T5's bucketing of ``key - query`` distances (Raffel et al. 2020, §2.1).

    Half the buckets (per direction when ``bidirectional``) hold exact small distances; the
    rest cover distances up to ``max_distance`` logarithmically; farther ones share the last.
    Unidirectional buckets only distinguish keys in the past (future distances map to 0).
    """
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    log_ratio = torch.log(distance.float().clamp(min=1) / max_exact) / math.log(
        max_distance / max_exact
    )
    large = max_exact + (log_ratio * (num_buckets - max_exact)).long()
    large = large.clamp(max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, large)


class RelativePositionBias(nn.Module):
    """Learned bias of distance (Steinert-Threlkeld (Transformers I)), T5-style: one learned scalar
    per (bucket, head).

    The score of query ``i`` and key ``j`` gets ``b_h[bucket(j - i)]``. Use
    ``bidirectional=True`` for encoders and ``False`` for causal decoders.
    """

    def __init__(
        self,
        num_heads: int,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
    ) -> None:
        super().__init__()
        check_positive("num_heads", num_heads)
        min_buckets = 4 if bidirectional else 2
        if num_buckets < min_buckets:
            raise ValueError(f"num_buckets must be >= {min_buckets}, got {num_buckets}")
        exact = num_buckets // (4 if bidirectional else 2)
        if max_distance <= exact:
            raise ValueError(
                f"max_distance must exceed the exact range {exact}, got {max_distance}"
            )
        self.num_heads, self.num_buckets = num_heads, num_buckets
        self.max_distance, self.bidirectional = max_distance, bidirectional
        self.embedding = nn.Embedding(num_buckets, num_heads)  # (buckets, H)
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, n_q: int, n_k: int, offset: int | None = None) -> Tensor:
        """Bias ``(H, n_q, n_k)``; query ``i`` at ``offset + i`` (default ``n_k - n_q``)."""
        offset = n_k - n_q if offset is None else offset
        rel = _distance(n_q, n_k, offset, self.embedding.weight.device)  # (n_q, n_k)
        bucket = relative_position_bucket(
            rel,
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )
        return self.embedding(bucket).permute(2, 0, 1)  # (H, n_q, n_k)


@dataclass(kw_only=True)
class PositionalConfig(Config):
    """The positional fields a Transformer model config shares (with its
    :class:`~attnlab.modules.block_config.BlockConfig`): the scheme's name (one of
    :data:`POSITIONAL_KINDS`), RoPE's base and T5's buckets. Defaults: the paper's sinusoids."""

    positional: str = "sinusoidal"
    rope_base: float = 10000.0
    num_buckets: int = 32
    max_distance: int = 128

    def __post_init__(self) -> None:
        self.check_positions(head_dim=None)

    def check_positions(self, head_dim: int | None) -> None:
        """Raise ``ValueError`` for an unknown scheme, or RoPE on an odd ``head_dim``."""
        check_choice("positional", self.positional, POSITIONAL_KINDS)
        check_positive("rope_base", self.rope_base)
        check_positive("num_buckets", self.num_buckets)
        check_positive("max_distance", self.max_distance)
        if self.positional == "rope" and head_dim is not None and head_dim % 2:
            raise ValueError(f"positional='rope' needs an even head width, got {head_dim}")


class PositionalScheme(nn.Module):
    """The positional scheme a model uses, chosen by one string from :data:`POSITIONAL_KINDS`.

    Gives a model the three hooks it needs, each a no-op when the scheme does not use it:

    * ``add(x, offset)`` — add absolute encodings to embeddings ``(B, n, d)``;
    * ``rotary`` — a :class:`RotaryEmbedding` to hand to self-attention, or ``None``;
    * ``bias(n_q, n_k, offset)`` — an additive ``(1, H, n_q, n_k)`` score bias, or ``None``.

    ``max_len`` bounds learned positions (and presizes the sinusoid table); ``bidirectional``
    chooses encoder (True) or causal-decoder (False) buckets for ``"relative"``.
    """

    def __init__(
        self,
        kind: str,
        *,
        d_model: int,
        num_heads: int,
        max_len: int = 512,
        bidirectional: bool = True,
        rope_base: float = 10000.0,
        num_buckets: int = 32,
        max_distance: int = 128,
    ) -> None:
        super().__init__()
        check_choice("positional", kind, POSITIONAL_KINDS)
        self.kind = kind
        self.absolute: nn.Module | None = None
        self.rotary: RotaryEmbedding | None = None
        self.distance: nn.Module | None = None
        if kind == "sinusoidal":
            self.absolute = SinusoidalPositionalEncoding(d_model, max_len)
        elif kind == "learned":
            self.absolute = LearnedPositionalEmbedding(max_len, d_model)
        elif kind == "rope":
            self.rotary = RotaryEmbedding(d_model // num_heads, base=rope_base)
        elif kind == "alibi":
            self.distance = ALiBi(num_heads)
        elif kind == "relative":
            self.distance = RelativePositionBias(
                num_heads, num_buckets, max_distance, bidirectional
            )

    @classmethod
    def from_config(cls, config: PositionalConfig, *, max_len: int, bidirectional: bool) -> PositionalScheme:
        """The scheme a model config names (a :class:`PositionalConfig` that is also a
        :class:`~attnlab.modules.block_config.BlockConfig`: its width and heads size the tables)."""
        return cls(
            config.positional,
            d_model=config.d_model,
            num_heads=config.num_heads,
            max_len=max_len,
            bidirectional=bidirectional,
            rope_base=config.rope_base,
            num_buckets=config.num_buckets,
            max_distance=config.max_distance,
        )

    def check_length(self, name: str, length: int, limit_name: str = "max_len") -> None:
        """Learned positions cannot extrapolate: a sequence of ``length`` must fit the table."""
        if isinstance(self.absolute, LearnedPositionalEmbedding) and length > self.absolute.max_len:
            raise ValueError(
                f"{name} reaches length {length} but learned positions allow at most "
                f"{limit_name}={self.absolute.max_len}"
            )

    def add(self, x: Tensor, offset: int = 0) -> Tensor:
        """``(B, n, d)`` embeddings at positions ``offset ..`` → with absolute positions added."""
        return x if self.absolute is None else self.absolute(x, offset)

    def bias(self, n_q: int, n_k: int, offset: int | None = None) -> Tensor | None:
        """Additive score bias ``(1, H, n_q, n_k)`` for ALiBi / relative schemes, else ``None``.

        4-D so that it broadcasts over the batch of ``(B, H, n_q, n_k)`` scores unambiguously.
        """
        return None if self.distance is None else self.distance(n_q, n_k, offset)[None]

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}"
