"""Show, Attend and Tell: an image captioner that looks at one part of the picture per word.

Xu, Ba, Kiros, Cho, Courville, Salakhutdinov, Zemel & Bengio (2015), "Show, Attend and Tell:
Neural Image Caption Generation with Visual Attention", §3 and §4.2 (Ba (CSC413 Lecture 8),
attention-based caption generation), with soft (deterministic) attention::

    a = CNN(image)                            annotation vectors (B, L, D), L = h·w   (§3.1.1)
    c_0 = tanh(f_init,c(ā)),  h_0 = tanh(f_init,h(ā)),  ā = (1/L) Σ_i a_i            (§3.1.2)
    α_t = softmax_i(w_vᵀ tanh(W_q h_{t-1} + W_k a_i))                   (eqs. 4-5, additive)
    β_t = σ(f_β(h_{t-1}));   z_t = β_t Σ_i α_ti a_i                          (§4.2, §4.2.1)
    h_t, c_t = LSTM([E y_{t-1}; z_t], (h_{t-1}, c_{t-1}))                          (eqs. 1-3)
    p(y_t | a, y_<t) = softmax(L_o(E y_{t-1} + L_h h_t + L_z z_t))          (eq. 7, deep output)

and the doubly stochastic regulariser λ Σ_i (1 − Σ_t α_ti)² (eq. 14), which pushes the model
to attend to every part of the image at some step (:meth:`ShowAttendTell.doubly_stochastic_penalty`).
The attention is the RNN decoders' additive alignment model
(:class:`~attnlab.attention.alignment.Alignment`, the score of
:class:`~attnlab.attention.AdditiveAttention`) with the decoder state as the query and the
annotation vectors as keys and values; its key side ``W_k a_i`` is computed once an image.
``attention = False`` is the baseline
without attention: the decoder reads the mean annotation ``ā`` at every step (no α, no β, no
attention parameters); everything else is the same code.

Decoding follows the seam of :class:`~attnlab.models.AttentionSeq2Seq`: ``encode(images)``
once — the image takes the place of a source sentence — then ``decode`` one token at a time
with a :class:`~attnlab.models.base.StateCache` holding ``(h, c)`` and the projected keys, so
greedy and beam search of :mod:`attnlab.generation` caption images unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnlab.attention.alignment import Alignment
from attnlab.config import Config
from attnlab.models.base import PretrainedModel, StateCache, register_model
from attnlab.models.conv_encoder import ConvEncoder
from attnlab.validation import check_ids, check_positive, check_probability, check_rank, shape_str


@dataclass
class ShowAttendTellConfig(Config):
    """The captioner's sizes.

    ``vocab_size`` and ``pad_id``: the caption vocabulary. ``in_channels`` (1 grey, 3 RGB) and
    ``image_size`` (square ``H = W``): the images it reads. ``conv_channels``: the widths of the
    encoder's conv + pool stages (each halves the side: the grid is ``image_size / 2 ** stages``
    on a side); ``feature_dim``: ``D``, the annotation vectors' width. ``embed_dim`` (``m``),
    ``hidden_dim`` (``n``, the LSTM) and ``attention_dim`` (the additive score's hidden width).
    ``dropout`` applies to the deep output before ``L_o``. ``attention``: soft attention
    (``True``) or the mean annotation at every step (the baseline). ``penalty``: ``λ`` of the
    doubly stochastic regulariser. ``batch_norm`` and ``grid_positions``: batch normalisation in
    the encoder and a learned vector per grid location (:class:`ConvEncoder`).
    """

    vocab_size: int
    pad_id: int = 0
    in_channels: int = 1
    image_size: int = 64
    conv_channels: tuple[int, ...] = (32, 64, 128)
    feature_dim: int = 128
    embed_dim: int = 64
    hidden_dim: int = 256
    attention_dim: int = 128
    dropout: float = 0.2
    attention: bool = True
    penalty: float = 1.0
    batch_norm: bool = True
    grid_positions: bool = True

    def __post_init__(self) -> None:
        self.conv_channels = tuple(self.conv_channels)
        for name in ("vocab_size", "in_channels", "image_size", "feature_dim", "embed_dim",
                     "hidden_dim", "attention_dim"):
            check_positive(name, getattr(self, name))
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id must be a token id in [0, {self.vocab_size}), got {self.pad_id}")
        if not self.conv_channels:
            raise ValueError("conv_channels must name at least one conv stage, got none")
        for i, width in enumerate(self.conv_channels):
            check_positive(f"conv_channels[{i}]", width)
        scale = 2 ** len(self.conv_channels)
        if self.image_size % scale != 0:
            raise ValueError(
                f"image_size must be divisible by 2 ** len(conv_channels) = {scale}, got "
                f"image_size={self.image_size} with conv_channels={list(self.conv_channels)}"
            )
        check_probability("dropout", self.dropout)
        check_positive("penalty", self.penalty, allow_zero=True)


@register_model(task="captioning", default=True)
class ShowAttendTell(PretrainedModel):
    """Xu et al.'s captioner with soft attention (module doc).

    ``encode(images (B, C, H, W))`` → ``(annotations (B, L, D), None)`` (every location is real:
    no mask); ``decode(tgt, annotations, mask, *, cache, return_weights)`` → logits ``(B, T, V)``
    and, with ``return_weights``, ``[α (B, 1, T, L)]`` (one layer, one head, as
    :meth:`~attnlab.models.AttentionSeq2Seq.decode`; ``[]`` without attention).
    ``forward(images, tgt_in, return_weights=...)`` is teacher forcing. Location ``i`` of the
    ``L = h · w`` grid is row ``i // w``, column ``i % w`` (:attr:`grid` is ``(h, w)``), so
    ``alphas.view(B, T, h, w)`` are the attention maps.
    """

    model_type = "show_attend_tell"
    config_class = ShowAttendTellConfig

    def __init__(self, config: ShowAttendTellConfig) -> None:
        super().__init__()
        self.config = c = config
        self.encoder = ConvEncoder(c.in_channels, c.image_size, c.conv_channels, c.feature_dim,
                                   batch_norm=c.batch_norm, positions=c.grid_positions)
        self.init_h = nn.Linear(c.feature_dim, c.hidden_dim)  # f_init,h
        self.init_c = nn.Linear(c.feature_dim, c.hidden_dim)  # f_init,c
        if c.attention:
            self.attention = Alignment("additive", c.hidden_dim, c.feature_dim, c.attention_dim)
            self.gate = nn.Linear(c.hidden_dim, 1)  # f_β
        self.embed = nn.Embedding(c.vocab_size, c.embed_dim)  # E
        self.cell = nn.LSTMCell(c.embed_dim + c.feature_dim, c.hidden_dim)
        self.out_h = nn.Linear(c.hidden_dim, c.embed_dim, bias=False)  # L_h
        self.out_z = nn.Linear(c.feature_dim, c.embed_dim, bias=False)  # L_z
        self.out = nn.Linear(c.embed_dim, c.vocab_size)  # L_o
        self.dropout = nn.Dropout(c.dropout)
        nn.init.normal_(self.embed.weight, std=c.embed_dim**-0.5)

    @property
    def grid(self) -> tuple[int, int]:
        """``(h, w)``: the annotation grid; ``L = h · w`` locations, row-major."""
        return self.encoder.grid

    @property
    def num_locations(self) -> int:
        """``L = h · w``."""
        h, w = self.grid
        return h * w

    # ------------------------------------------------------------------ encoder
    def encode(self, images: Tensor) -> tuple[Tensor, None]:
        """``images`` ``(B, C, H, W)`` float → ``(annotations (B, L, D), None)``.

        ``ValueError`` names the expected shape ``(B, in_channels, image_size, image_size)``
        and the one given (a wrong channel count or size is refused, never resized here)."""
        return self.encoder(images), None

    # ------------------------------------------------------------------ decoder
    def new_cache(self) -> StateCache:
        """An empty :class:`StateCache` for :meth:`decode` (it will hold ``h`` and ``c``)."""
        return StateCache()

    def _check_decode(self, tgt: Tensor, memory: Tensor, mask: Tensor | None) -> None:
        c = self.config
        check_ids("tgt", tgt, c.vocab_size)
        check_rank("memory", memory, 3, "(B, L, D) annotation vectors")
        if memory.shape[-1] != c.feature_dim:
            raise ValueError(
                f"memory has width {memory.shape[-1]} but the model expects feature_dim="
                f"{c.feature_dim}, got shape {shape_str(memory.shape)}"
            )
        if memory.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"memory has batch size {memory.shape[0]} but tgt has batch size {tgt.shape[0]}"
            )
        if mask is not None and tuple(mask.shape) != tuple(memory.shape[:2]):
            raise ValueError(
                f"mask has shape {shape_str(mask.shape)} but memory has {memory.shape[1]} "
                f"locations: expected {shape_str(memory.shape[:2])}"
            )

    @staticmethod
    def mean_annotation(memory: Tensor, mask: Tensor | None = None) -> Tensor:
        """``ā = (1/L) Σ_i a_i``: ``memory (B, L, D)`` → ``(B, D)``, over the ``True``
        locations of ``mask (B, L)`` when one is given."""
        if mask is None:
            return memory.mean(dim=1)  # (B, D)
        weights = mask.to(memory.dtype).unsqueeze(-1)  # (B, L, 1)
        return (memory * weights).sum(1) / weights.sum(1).clamp(min=1.0)  # (B, D)

    def _read(
        self, h: Tensor, memory: Tensor, keys: Tensor | None, mask: Tensor | None, mean: Tensor
    ) -> tuple[Tensor, Tensor | None]:
        """The context ``z_t`` ``(B, D)`` read with the state ``h_{t-1}`` ``(B, n)`` over the
        prepared keys ``W_k a`` ``(B, L, h)``, and ``α_t`` ``(B, L)`` (``None`` without
        attention: ``z_t = ā``)."""
        if not self.config.attention:
            return mean, None
        alpha = self.attention(h, keys, mask)  # (B, L)
        read = (alpha.unsqueeze(1) @ memory).squeeze(1)  # (B, D): Σ_i α_ti a_i
        beta = torch.sigmoid(self.gate(h))  # (B, 1), §4.2.1
        return beta * read, alpha

    def decode(
        self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None = None, *,
        cache: StateCache | None = None, return_weights: bool = False, check: bool = True,
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Logits ``(B, T, V)`` of the caption tokens ``tgt`` ``(B, T)`` (``y_{t-1}``, bos
        first) given the annotations ``memory`` ``(B, L, D)``; ``src_mask`` ``(B, L)`` (True =
        a real location) or ``None`` (all real). With ``return_weights`` also ``[α (B, 1, T,
        L)]`` (``[]`` without attention). With a ``cache``, ``tgt`` holds only the new tokens and
        ``(h, c)`` is carried over; without one, ``(h_0, c_0)`` come from ``ā``. ``check=False``:
        the caller made (or checked) ``tgt``, ``memory`` and ``src_mask`` itself."""
        if check:
            self._check_decode(tgt, memory, src_mask)
        mean = self.mean_annotation(memory, src_mask)  # (B, D)
        if cache is not None and "h" in cache:
            h, c = cache["h"], cache["c"]  # (B, n) each
        else:
            h, c = torch.tanh(self.init_h(mean)), torch.tanh(self.init_c(mean))  # (B, n), §3.1.2
        keys = None  # W_k a: the key side of the score, once an image
        if self.config.attention:
            keys = cache["keys"] if cache is not None and "keys" in cache else self.attention.prepare(memory)
        embedded = self.embed(tgt)  # (B, T, m)
        states, contexts, alphas = [], [], []
        for t in range(tgt.shape[1]):
            z, alpha = self._read(h, memory, keys, src_mask, mean)  # (B, D), (B, L) | None
            h, c = self.cell(torch.cat([embedded[:, t], z], dim=-1), (h, c))  # (B, n) each
            states.append(h)
            contexts.append(z)
            alphas.append(alpha)
        if cache is not None:
            cache.update(h=h, c=c, **({} if keys is None else {"keys": keys}))
            cache.offset += tgt.shape[1]
        deep = embedded + self.out_h(torch.stack(states, 1)) + self.out_z(torch.stack(contexts, 1))
        logits = self.out(self.dropout(deep))  # (B, T, V), eq. 7
        if not return_weights:
            return logits
        if not self.config.attention:
            return logits, []
        return logits, [torch.stack(alphas, dim=1).unsqueeze(1)]  # [(B, 1, T, L)]

    def forward(
        self, images: Tensor, tgt_in: Tensor, *, return_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Teacher forcing: ``images`` ``(B, C, H, W)``, ``tgt_in`` ``(B, T)`` (bos, y_1, …) →
        logits ``(B, T, V)``; with ``return_weights`` also ``[α (B, 1, T, L)]`` as
        :meth:`decode` (``[]`` without attention; ``weights[0][:, 0]`` are the ``(B, T, L)``
        maps :meth:`doubly_stochastic_penalty` takes)."""
        memory, mask = self.encode(images)  # (B, L, D), None
        check_ids("tgt_in", tgt_in, self.config.vocab_size)
        if memory.shape[0] != tgt_in.shape[0]:
            raise ValueError(
                f"tgt_in has batch size {tgt_in.shape[0]} but images has batch size {memory.shape[0]}"
            )
        return self.decode(tgt_in, memory, mask, return_weights=return_weights, check=False)

    # ------------------------------------------------------------------ regulariser
    def doubly_stochastic_penalty(self, alphas: Tensor | None, tgt_mask: Tensor | None = None) -> Tensor:
        """``λ Σ_i (1 − Σ_t α_ti)²`` averaged over the batch (Xu et al. eq. 14; ``λ`` is
        ``config.penalty``): ``alphas`` ``(B, T, L)``, ``tgt_mask`` ``(B, T)`` True at the real
        target steps (padding adds no attention). A scalar; zero without attention (``None``).

        With ``T`` real steps over ``L`` locations the smallest value is ``λ (L − T)² / L``
        (``T < L``: attention spread evenly over time and space); its gradient, not its
        value, is what pushes every location to be looked at."""
        if alphas is None:
            return torch.zeros((), device=self.out.weight.device)
        check_rank("alphas", alphas, 3, "(B, T, L)")
        if tgt_mask is not None:
            if tuple(tgt_mask.shape) != tuple(alphas.shape[:2]):
                raise ValueError(
                    f"tgt_mask has shape {shape_str(tgt_mask.shape)} but alphas has shape "
                    f"{shape_str(alphas.shape)}: expected {shape_str(alphas.shape[:2])}"
                )
            alphas = alphas * tgt_mask.to(alphas.dtype).unsqueeze(-1)  # (B, T, L)
        coverage = alphas.sum(dim=1)  # (B, L): Σ_t α_ti
        return self.config.penalty * ((1.0 - coverage) ** 2).sum(dim=1).mean()
