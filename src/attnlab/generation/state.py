"""Decoding state shared by greedy search, beam search and sampling.

Ba (CSC413 Lecture 8) "Computational Cost and Parallelism": "when generating sentences, the computation in
the self-attention decoder grows as the sequence gets longer". A state keeps one row per
hypothesis — the tokens decoded so far and, with ``use_cache``, the model's per-layer KV
cache (:class:`~attnlab.models.base.ModelCache`) — so each step feeds only the new token.
Three operations drive every search::

    logits = state.logits()        # (R, V) next-token logits of each row
    state.select(index)            # keep rows ``index`` (R',): beam reordering, finished rows out
    state.append(next_tokens)      # (R,) one new token per row

Encoder-decoder (:class:`EncoderDecoderState`): the source is encoded once; rows start from
``bos_id``; the cache holds the decoder's self-attention keys/values, which grow by one
position a step, and the cross-attention keys/values, projected from the memory at the first
step and reused (and reordered) after that.

Decoder-only (:class:`DecoderOnlyState`): rows start from the prompt. **Sliding window.** The
model sees at most ``block_size`` tokens. Let the context be ``tokens[start:L]`` (``start = 0``
at first). Whenever it would grow past ``block_size`` tokens, the window jumps forward:
``start = L - keep``, so the context restarts as the last ``keep`` tokens (default
``block_size // 2``). With learned (absolute) positions every token of the new window has a
new position, so the cache is dropped and the window is re-encoded in one forward call; the
same rule is used for every positional scheme. Without the cache, each step recomputes the same
window from scratch, so cached and uncached decoding see identical contexts and emit identical
tokens. ``keep = block_size`` reproduces nanoGPT's crop to the last ``block_size`` tokens
(re-encoding the whole window at every step once the sequence is full); ``keep =
block_size // 2`` re-encodes half a window every ``block_size // 2`` steps, so each token costs
O(block_size) on average while every prediction still sees at least ``keep`` tokens.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor, nn

from attnlab.devices import model_device
from attnlab.validation import check_positive, check_rank, check_tensor, check_token_ids, shape_str

BeforeStep = Callable[[], None]
"""Called before every model call of a decoding loop; what it raises ends the decoding there."""


def is_encoder_decoder(model: nn.Module) -> bool:
    """A model with ``encode`` and ``decode`` (like :class:`~attnlab.models.Transformer`)."""
    return callable(getattr(model, "encode", None)) and callable(getattr(model, "decode", None))


@contextmanager
def inference(model: nn.Module, *, tokens_only: bool = False) -> Iterator[None]:
    """Eval mode (no dropout) and no autograd while decoding; each module's mode is restored.

    ``tokens_only``: the block returns token ids and scores, no tensor that could later join
    autograd, so it runs under ``torch.inference_mode`` — cheaper per op than ``no_grad``
    (no version counters, no autograd metadata), which a one-token decoding step feels.
    """
    training = [m for m in model.modules() if m.training]  # usually none: nothing to switch
    if training:
        model.eval()
    try:
        with torch.inference_mode() if tokens_only else torch.no_grad():
            yield
    finally:
        for m in training:  # exactly the modules that were training (modes may be mixed)
            m.training = True


def window_start(length: int, start: int, block_size: int, keep: int) -> int:
    """Start of the context ``tokens[start:length]`` after the sliding-window rule (module doc)."""
    return length - keep if length - start > block_size else start


def takes_check(method: Callable, name: str = "check") -> bool:
    """Whether a model's ``decode`` / ``forward`` takes ``check`` (docs/design.md, "Validate
    once"): the decoding loops pass ``check=False`` to it after their first step. ``name``: another
    keyword (``last_only``: the model can return the last position's logits alone)."""
    try:
        return name in inspect.signature(method).parameters
    except (TypeError, ValueError):  # no signature to read: called as it is
        return False


def check_count(name: str, value: object) -> int:
    """A positive ``int`` (not bool); ``ValueError`` names the argument otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a positive int, got {type(value).__name__} {value!r}")
    check_positive(name, value)
    return value


def as_prompt(
    prompt: Tensor | Sequence[int], device: torch.device, vocab_size: int | None
) -> Tensor:
    """A prompt as ids ``(B, n)``: a ``(B, n)`` or ``(n,)`` tensor or a list of ints; ``n >= 1``."""
    if not isinstance(prompt, Tensor):
        prompt = torch.as_tensor(list(prompt), dtype=torch.long, device=device)
    check_rank("prompt", prompt, (1, 2), "(B, n) or (n,) token ids")
    prompt = prompt if prompt.dim() == 2 else prompt.unsqueeze(0)  # (B, n)
    if prompt.shape[0] == 0 or prompt.shape[1] == 0:
        raise ValueError(
            f"prompt must hold at least one token (in at least one row), got shape "
            f"{shape_str(prompt.shape)}"
        )
    if vocab_size is not None:
        check_token_ids("prompt", prompt, vocab_size)
    return prompt.long().to(device)


class DecodingRows:
    """What both states share: the rows' tokens ``(R, L)`` and the model call. The first call
    is checked in full; every later step feeds the model its own tokens and cache in the layout
    that call validated, so a model whose step takes ``check`` (:func:`takes_check`) is then
    called with ``check=False``. ``before_step``, if given, is called before every model call."""

    tokens: Tensor  # (R, L)
    checked: bool = False
    takes_check: bool = False  # the model's step takes check: later steps pass check=False
    before_step: BeforeStep | None = None

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def run(self, fn: Callable[..., Tensor], *args, **kwargs) -> Tensor:
        """``fn(*args, **kwargs)`` after :attr:`before_step`; after the first call, with
        ``check=False`` when the model takes it."""
        if self.before_step is not None:
            self.before_step()
        if not self.checked:
            out = fn(*args, **kwargs)
            self.checked = True
            return out
        if self.takes_check:
            return fn(*args, check=False, **kwargs)
        return fn(*args, **kwargs)

    def append(self, next_tokens: Tensor) -> None:
        self.tokens = torch.cat([self.tokens, next_tokens.view(-1, 1)], dim=1)  # (R, L + 1)


class DecoderOnlyState(DecodingRows):
    """Rows of a decoder-only language model (``model(idx, cache=...)``, ``model.new_cache()``,
    ``model.config.block_size``), decoded with the sliding window of the module docstring."""

    blocked: tuple[int, ...] = ()
    limit: int | None = None  # no cap on new tokens: the window slides

    def __init__(
        self, model: nn.Module, prompt: Tensor, *, use_cache: bool, window_keep: int | None,
        before_step: BeforeStep | None = None,
    ) -> None:
        self.model, self.use_cache, self.before_step = model, use_cache, before_step
        self.takes_check = takes_check(model.forward)
        self.last_only = {"last_only": True} if takes_check(model.forward, "last_only") else {}
        self.block_size = model.config.block_size
        self.keep = max(1, self.block_size // 2) if window_keep is None else window_keep
        if not 1 <= self.keep <= self.block_size:
            raise ValueError(
                f"window_keep must be in [1, block_size={self.block_size}], got {self.keep}"
            )
        self.tokens = prompt  # (R, L)
        self.start = 0  # context = tokens[:, start:]
        self.cache = None  # holds the keys/values of tokens[:, cache_start:cached]
        self.cache_start = self.cached = 0

    def logits(self) -> Tensor:
        """Next-token logits ``(R, V)`` given the context window."""
        length = self.tokens.shape[1]
        self.start = window_start(length, self.start, self.block_size, self.keep)
        if not self.use_cache:
            return self.run(self.model, self.tokens[:, self.start :], **self.last_only)[:, -1]  # (R, V)
        if self.cache is None or self.cache_start != self.start:  # first step, or the window slid
            self.cache, self.cache_start, self.cached = (
                self.model.new_cache(),
                self.start,
                self.start,
            )
        logits = self.run(
            self.model, self.tokens[:, self.cached :], cache=self.cache, **self.last_only
        )[:, -1]  # (R, V)
        self.cached = length
        return logits

    def select(self, index: Tensor, *, same_sources: bool = False) -> None:
        """Keep rows ``index`` ``(R',)`` (``same_sources``: see :class:`EncoderDecoderState`)."""
        self.tokens = self.tokens.index_select(0, index)  # (R', L)
        if self.cache is not None:
            self.cache.reorder(index)


class EncoderDecoderState(DecodingRows):
    """Rows of an encoder-decoder model (``encode``, ``decode``, ``new_cache``) over one memory.

    ``memory`` ``(R, S, d)`` and ``src_mask`` ``(R, S)`` come from ``model.encode`` (repeated per
    beam by the caller). The pad token and ``bos_id`` are never generated (``blocked``);
    learned positions cap the output at ``config.max_len`` tokens (``limit``).
    """

    def __init__(
        self,
        model: nn.Module,
        memory: Tensor,
        src_mask: Tensor | None,
        *,
        bos_id: int,
        eos_id: int,
        use_cache: bool,
        before_step: BeforeStep | None = None,
    ) -> None:
        self.model, self.use_cache, self.before_step = model, use_cache, before_step
        self.takes_check = takes_check(model.decode)
        self.memory, self.src_mask = memory, src_mask  # (R, S, d), (R, S)
        self.tokens = torch.full(
            (memory.shape[0], 1), bos_id, dtype=torch.long, device=memory.device
        )
        self.cache, self.cached = None, 0
        config = getattr(model, "config", None)
        pad_id = getattr(config, "pad_id", None)
        self.blocked = tuple(sorted({t for t in (pad_id, bos_id) if t is not None and t != eos_id}))
        learned = getattr(config, "positional", None) == "learned"
        self.limit = config.max_len if learned else None

    def logits(self) -> Tensor:
        """Next-token logits ``(R, V)`` after the tokens decoded so far."""
        if not self.use_cache:
            return self.run(self.model.decode, self.tokens, self.memory, self.src_mask)[:, -1]  # (R, V)
        if self.cache is None:
            self.cache = self.model.new_cache()
        logits = self.run(
            self.model.decode, self.tokens[:, self.cached :], self.memory, self.src_mask, cache=self.cache
        )[:, -1]  # (R, V)
        self.cached = self.tokens.shape[1]
        return logits

    def select(self, index: Tensor, *, same_sources: bool = False) -> None:
        """Keep rows ``index`` ``(R',)``. ``same_sources``: row ``i`` was already a row of the
        source that row ``index[i]`` decodes (beam search reordering one sentence's hypotheses),
        so the memory, the source mask and the static (cross-attention) caches, equal across
        those rows, stay as they are; only the tokens and the growing caches follow ``index``."""
        self.tokens = self.tokens.index_select(0, index)  # (R', T)
        if not same_sources:
            self.memory = self.memory.index_select(0, index)  # (R', S, d)
            if self.src_mask is not None:
                self.src_mask = self.src_mask.index_select(0, index)  # (R', S)
        if self.cache is not None:
            self.cache.reorder(index, static=not same_sources)


def make_state(
    model: nn.Module,
    src: Tensor | tuple[Tensor, ...] | None,
    prompt: Tensor | Sequence[int] | None,
    *,
    bos_id: int | None,
    eos_id: int | None,
    use_cache: bool,
    window_keep: int | None = None,
    repeat: int = 1,
    before_step: BeforeStep | None = None,
) -> tuple[DecoderOnlyState | EncoderDecoderState, int]:
    """The decoding state of ``model`` for ``src`` (encoder-decoder) or ``prompt`` (decoder-only),
    each input row repeated ``repeat`` times (beams), calling ``before_step`` before every model
    step; returns ``(state, batch size B)``.

    ``src`` is whatever ``model.encode`` reads, batch first — token ids ``(B, S)`` for the
    translators, images ``(B, C, H, W)`` for :class:`~attnlab.models.ShowAttendTell`, or a tuple
    of tensors passed as ``encode``'s arguments: padded features ``(B, F, D)`` and their lengths
    ``(B,)`` for the recognizers — and ``encode`` checks its layout; only the memory ``(B, S, d)``
    it returns is decoded here."""
    if (src is None) == (prompt is None):
        raise ValueError(
            "pass exactly one of src (encoder-decoder models) or prompt (decoder-only)"
        )
    device = model_device(model)
    if not is_encoder_decoder(model):
        if src is not None:
            raise ValueError(
                f"src is for encoder-decoder models, but {type(model).__name__} has no "
                "encode/decode; pass prompt= instead"
            )
        ids = as_prompt(prompt, device, getattr(getattr(model, "config", None), "vocab_size", None))
        ids = ids.repeat_interleave(repeat, dim=0)  # (B·repeat, n)
        return DecoderOnlyState(
            model, ids, use_cache=use_cache, window_keep=window_keep, before_step=before_step
        ), ids.shape[0] // repeat
    if prompt is not None:
        raise ValueError(
            f"{type(model).__name__} is an encoder-decoder model: pass src=, not prompt="
        )
    if bos_id is None or eos_id is None:
        raise ValueError(
            "encoder-decoder decoding needs bos_id and eos_id, "
            f"got bos_id={bos_id}, eos_id={eos_id}"
        )
    inputs = src if isinstance(src, tuple) else (src,)  # (features, lengths): encode's arguments
    for x in inputs:
        check_tensor("src", x)  # its layout is the model's: encode checks it
    if inputs[0].dim() == 0 or inputs[0].numel() == 0:
        raise ValueError(
            "src must hold at least one input (a row of token ids, an image) and no empty "
            f"dimension, got shape {shape_str(inputs[0].shape)}"
        )
    memory, src_mask = model.encode(*(x.to(device) for x in inputs))  # (B, S, d), (B, S)
    if src_mask is not None and bool(src_mask.all()):
        src_mask = None  # no padding: nothing to mask, and no per-step look at the mask
    memory = memory.repeat_interleave(repeat, dim=0)  # (B·repeat, S, d)
    if src_mask is not None:
        src_mask = src_mask.repeat_interleave(repeat, dim=0)  # (B·repeat, S)
    state = EncoderDecoderState(
        model, memory, src_mask, bos_id=bos_id, eos_id=eos_id, use_cache=use_cache,
        before_step=before_step,
    )
    return state, inputs[0].shape[0]
