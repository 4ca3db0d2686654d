"""Batches for translation (length-bucketed by token budget) and for language modelling.

Translation: a :class:`TranslationDataset` holds token-id pairs; a :class:`TokenBatchSampler`
sorts them by length and packs them into batches whose *padded* size stays within
``max_tokens`` (as in the Transformer paper, §5.1: "batches of approximately 25000 source
tokens and 25000 target tokens"); :func:`collate` pads a batch into tensors with the PAD id
and keeps the lengths that build the padding mask (Li (Transformer Part I), "Example: Padding Mask").
The decoder is trained with teacher forcing: it reads ``tgt_in = <bos> y_1 .. y_m`` and
predicts ``tgt_out = y_1 .. y_m <eos>``.

>>> data = TranslationDataset.from_pairs(pairs, src_tok, tgt_tok)
>>> sampler = TokenBatchSampler(data.lengths, max_tokens=4096, seed=0)
>>> loader = torch.utils.data.DataLoader(data, batch_sampler=sampler, collate_fn=data.collate)
>>> sampler.set_epoch(epoch)        # new, reproducible batch order each epoch

Language modelling: :class:`LMDataset` cuts random windows from one long token stream.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset, Sampler

from attnlab.data.tokenizers import AnyTokenizer
from attnlab.validation import check_positive, check_rank

Ids = Sequence[int]


@dataclass
class Batch:
    """A padded translation batch (``pad_id`` fills the unused slots)."""

    src: Tensor  # (B, S) source ids
    tgt_in: Tensor  # (B, T) <bos> + target ids: decoder input
    tgt_out: Tensor  # (B, T) target ids + <eos>: what the decoder must predict
    src_lengths: Tensor  # (B,) real source tokens per row
    tgt_lengths: Tensor  # (B,) real tokens per row of tgt_in / tgt_out (= target + 1)

    @property
    def num_tokens(self) -> int:
        """Target tokens to predict (the loss normalizer)."""
        return int(self.tgt_lengths.sum())

    @property
    def src_mask(self) -> Tensor:
        """``(B, 1, 1, S)`` boolean, ``True`` at real source tokens (attnlab mask convention)."""
        from attnlab.attention.masks import lengths_to_mask

        mask = lengths_to_mask(self.src_lengths, self.src.shape[1])  # (B, S)
        return mask[:, None, None, :]  # (B, 1, 1, S)

    def to(self, device: torch.device | str) -> Batch:
        return Batch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})


def collate(examples: Sequence[tuple[Ids, Ids]], *, pad_id: int, bos_id: int, eos_id: int) -> Batch:
    """Pad ``(source_ids, target_ids)`` pairs into a :class:`Batch`.

    ``S`` is the longest source; ``T`` is the longest target + 1 (for ``<bos>``/``<eos>``).
    """
    if not examples:
        raise ValueError("examples must hold at least one (source, target) pair, got 0")

    def pad(rows: list[list[int]]) -> Tensor:
        tensors = [torch.tensor(r, dtype=torch.long) for r in rows]
        return pad_sequence(tensors, batch_first=True, padding_value=pad_id)  # (B, max len)

    src = [list(s) for s, _ in examples]
    tgt = [list(t) for _, t in examples]
    return Batch(
        src=pad(src),  # (B, S)
        tgt_in=pad([[bos_id, *t] for t in tgt]),  # (B, T)
        tgt_out=pad([[*t, eos_id] for t in tgt]),  # (B, T)
        src_lengths=torch.tensor([len(s) for s in src], dtype=torch.long),  # (B,)
        tgt_lengths=torch.tensor([len(t) + 1 for t in tgt], dtype=torch.long),  # (B,)
    )


class TranslationDataset(Dataset):
    """Encoded sentence pairs; item ``i`` is ``(source_ids, target_ids)`` without specials."""

    def __init__(
        self,
        src: Sequence[Ids],
        tgt: Sequence[Ids],
        *,
        pad_id: int = 0,
        bos_id: int = 1,
        eos_id: int = 2,
    ) -> None:
        if len(src) != len(tgt):
            raise ValueError(f"src has {len(src)} sequences but tgt has {len(tgt)}")
        self.src, self.tgt = list(src), list(tgt)
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id

    @classmethod
    def from_pairs(
        cls,
        pairs: Sequence[tuple[str, str]],
        src_tokenizer: AnyTokenizer,
        tgt_tokenizer: AnyTokenizer,
        *,
        max_len: int | None = None,
    ) -> TranslationDataset:
        """Encode text pairs; with ``max_len``, drop pairs whose source or target + 1 is longer."""
        src = src_tokenizer.encode_batch([s for s, _ in pairs])
        tgt = tgt_tokenizer.encode_batch([t for _, t in pairs])
        if max_len is not None:
            keep = [i for i in range(len(src)) if max(len(src[i]), len(tgt[i]) + 1) <= max_len]
            src, tgt = [src[i] for i in keep], [tgt[i] for i in keep]
        tok = tgt_tokenizer
        return cls(src, tgt, pad_id=tok.pad_id, bos_id=tok.bos_id, eos_id=tok.eos_id)

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i: int) -> tuple[Ids, Ids]:
        return self.src[i], self.tgt[i]

    @property
    def lengths(self) -> list[int]:
        """Padded row width of each pair: ``max(len(source), len(target) + 1)``."""
        return [max(len(s), len(t) + 1) for s, t in zip(self.src, self.tgt, strict=True)]

    def collate(self, examples: Sequence[tuple[Ids, Ids]]) -> Batch:
        return collate(examples, pad_id=self.pad_id, bos_id=self.bos_id, eos_id=self.eos_id)


def token_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Group indices of similar length so that ``len(batch) * max(lengths[batch]) <= max_tokens``.

    Indices are sorted by length (ties by index) and packed greedily: deterministic.
    """
    check_positive("max_tokens", max_tokens)
    batches: list[list[int]] = []
    current: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if lengths[i] > max_tokens:
            raise ValueError(
                f"example {i} needs {lengths[i]} tokens but max_tokens is {max_tokens}; "
                f"raise max_tokens or drop long pairs (max_len)"
            )
        # Sorted order: lengths[i] is the longest of the batch if i joins it.
        if current and (len(current) + 1) * lengths[i] > max_tokens:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def _split_until_divisible(batches: list[list[int]], world_size: int) -> list[list[int]]:
    """Halve the most populous batches until every rank can get the same number."""
    batches = list(batches)
    while len(batches) % world_size:
        big = max(range(len(batches)), key=lambda j: len(batches[j]))
        if len(batches[big]) < 2:
            n = sum(len(b) for b in batches)
            raise ValueError(
                f"cannot give world_size={world_size} ranks equal shards of {n} examples"
            )
        b = batches.pop(big)
        batches[big:big] = [b[: len(b) // 2], b[len(b) // 2 :]]
    return batches


class TokenBatchSampler(Sampler[list[int]]):
    """Yields lists of dataset indices: length-bucketed, token-budgeted, shuffled, sharded.

    Batch contents are fixed (:func:`token_batches`); their order is shuffled each epoch with
    a generator seeded by ``seed + epoch`` (call :meth:`set_epoch`), identically on every
    rank. Rank ``r`` of ``world_size`` takes batches ``r, r + world_size, ...`` of that order;
    batches are split beforehand so that every rank gets the same number and together the
    ranks see every example exactly once per epoch.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        max_tokens: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        check_positive("world_size", world_size)
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}")
        self.batches = _split_until_divisible(token_batches(lengths, max_tokens), world_size)
        self.shuffle, self.seed, self.rank, self.world_size = shuffle, seed, rank, world_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.batches) // self.world_size

    def __iter__(self) -> Iterator[list[int]]:
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(len(self.batches), generator=generator).tolist()
        else:
            order = list(range(len(self.batches)))
        for j in order[self.rank :: self.world_size]:
            yield list(self.batches[j])


class LMDataset:
    """Random contiguous windows of a 1-D token stream, as nanoGPT's ``get_batch``.

    ``x`` is a window of ``block_size`` tokens and ``y`` the same window shifted by one:
    position ``t`` of ``y`` is the next token after position ``t`` of ``x``.
    """

    def __init__(self, tokens: Tensor, block_size: int, *, seed: int = 0) -> None:
        check_rank("tokens", tokens, 1, "(N,)")
        check_positive("block_size", block_size)
        if tokens.numel() < block_size + 1:
            raise ValueError(
                f"tokens has {tokens.numel()} tokens but block_size + 1 = {block_size + 1} "
                f"are needed"
            )
        self.tokens = tokens.long()  # (N,)
        self.block_size = block_size
        self.generator = torch.Generator().manual_seed(seed)
        self._offsets = torch.arange(block_size + 1)  # (block + 1,)

    def get_batch(self, batch_size: int) -> tuple[Tensor, Tensor]:
        """``x, y`` of shape ``(B, block_size)`` each, windows drawn uniformly at random."""
        check_positive("batch_size", batch_size)
        n_starts = self.tokens.numel() - self.block_size
        starts = torch.randint(n_starts, (batch_size,), generator=self.generator)  # (B,)
        windows = self.tokens[starts[:, None] + self._offsets]  # (B, block + 1)
        return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()  # (B, block) each

    def state_dict(self) -> dict[str, Tensor]:
        """The generator state, so a resumed run draws the same windows."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.generator.set_state(state["generator"])
