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

import numpy as np
import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset, Sampler

from attnlab.data.prepared import Rows
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

    def pad(rows: list[Tensor]) -> Tensor:
        return pad_sequence(rows, batch_first=True, padding_value=pad_id)  # (B, max len)

    src = [torch.as_tensor(np.asarray(s, dtype=np.int64)) for s, _ in examples]
    tgt = [torch.as_tensor(np.asarray(t, dtype=np.int64)) for _, t in examples]
    bos, eos = torch.tensor([bos_id]), torch.tensor([eos_id])
    return Batch(
        src=pad(src),  # (B, S)
        tgt_in=pad([torch.cat([bos, t]) for t in tgt]),  # (B, T)
        tgt_out=pad([torch.cat([t, eos]) for t in tgt]),  # (B, T)
        src_lengths=torch.tensor([len(s) for s in src], dtype=torch.long),  # (B,)
        tgt_lengths=torch.tensor([len(t) + 1 for t in tgt], dtype=torch.long),  # (B,)
    )


class TranslationDataset(Dataset):
    """Encoded sentence pairs; item ``i`` is ``(source_ids, target_ids)`` without specials.

    ``src`` and ``tgt`` are lists of id lists, or memory-mapped :class:`~attnlab.data.prepared.Rows`;
    ``keep`` (indices into them) takes a subset without copying a row.
    """

    def __init__(
        self,
        src: Sequence[Ids] | Rows,
        tgt: Sequence[Ids] | Rows,
        *,
        pad_id: int = 0,
        bos_id: int = 1,
        eos_id: int = 2,
        keep: np.ndarray | None = None,
    ) -> None:
        if len(src) != len(tgt):
            raise ValueError(f"src has {len(src)} sequences but tgt has {len(tgt)}")
        rows = isinstance(src, Rows)
        self.src, self.tgt = (src, tgt) if rows else (list(src), list(tgt))
        self.keep = np.arange(len(src)) if keep is None else keep
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
        """Encode text pairs; with ``max_len``, leave out pairs whose source or target + 1 is longer."""
        src = src_tokenizer.encode_batch([s for s, _ in pairs])
        tgt = tgt_tokenizer.encode_batch([t for _, t in pairs])
        return cls.from_rows(src, tgt, tgt_tokenizer, max_len=max_len)

    @classmethod
    def from_rows(cls, src: Sequence[Ids] | Rows, tgt: Sequence[Ids] | Rows, tokenizer: AnyTokenizer,
                  *, max_len: int | None = None) -> TranslationDataset:
        """Encoded pairs (``tokenizer``: the target side's, for its special ids); with
        ``max_len``, those whose source or target + 1 is longer are left out (:attr:`too_long`
        counts them)."""
        tok = tokenizer
        data = cls(src, tgt, pad_id=tok.pad_id, bos_id=tok.bos_id, eos_id=tok.eos_id)
        if max_len is not None:
            data.keep = np.flatnonzero(data.lengths <= max_len)
        return data

    @property
    def too_long(self) -> int:
        """How many pairs :meth:`from_rows` left out for ``max_len``."""
        return len(self.src) - len(self.keep)

    def __len__(self) -> int:
        return len(self.keep)

    def __getitem__(self, i: int) -> tuple[Ids, Ids]:
        j = int(self.keep[i])
        return self.src[j], self.tgt[j]

    def side_lengths(self, side: str) -> np.ndarray:
        """The length of every kept source (``"src"``) or target (``"tgt"``) sentence, (N,)."""
        rows = self.src if side == "src" else self.tgt
        every = rows.lengths if isinstance(rows, Rows) else np.fromiter(map(len, rows), np.int64, len(rows))
        return every[self.keep]

    @property
    def lengths(self) -> np.ndarray:
        """Padded row width of each pair: ``max(len(source), len(target) + 1)``, (N,)."""
        return np.maximum(self.side_lengths("src"), self.side_lengths("tgt") + 1)

    def collate(self, examples: Sequence[tuple[Ids, Ids]]) -> Batch:
        return collate(examples, pad_id=self.pad_id, bos_id=self.bos_id, eos_id=self.eos_id)


def token_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Group indices of similar length so that ``len(batch) * max(lengths[batch]) <= max_tokens``.

    Indices are sorted by length (ties by index) and packed greedily: deterministic.
    """
    check_positive("max_tokens", max_tokens)
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(lengths, kind="stable")  # by length, ties by index
    if len(order) and lengths[order[-1]] > max_tokens:
        i = int(order[-1])
        raise ValueError(
            f"example {i} needs {lengths[i]} tokens but max_tokens is {max_tokens}; "
            f"raise max_tokens or drop long pairs (max_len)"
        )
    batches: list[list[int]] = []
    current: list[int] = []
    for i, n in zip(order.tolist(), lengths[order].tolist(), strict=True):
        # Sorted order: n is the longest of the batch if i joins it.
        if current and (len(current) + 1) * n > max_tokens:
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
    position ``t`` of ``y`` is the next token after position ``t`` of ``x``. ``tokens`` is a
    tensor or a NumPy array — a memory-mapped token file is read a window at a time, so memory
    does not grow with the corpus. ``part = (rank, world_size)`` draws only from the rank's own
    ``1 / world_size`` of the stream (disjoint, contiguous parts), as each process of
    ``torchrun`` must.
    """

    def __init__(self, tokens: Tensor | np.ndarray, block_size: int, *, seed: int = 0,
                 part: tuple[int, int] = (0, 1)) -> None:
        if isinstance(tokens, Tensor):
            check_rank("tokens", tokens, 1, "(N,)")
        check_positive("block_size", block_size)
        rank, world = part
        n = len(tokens)
        self.start, stop = n * rank // world, n * (rank + 1) // world
        if stop - self.start < block_size + 1:
            where = f"part {rank + 1} of {world} of the stream" if world > 1 else "tokens"
            raise ValueError(
                f"{where} has {stop - self.start} tokens but block_size + 1 = {block_size + 1} are needed"
            )
        self.tokens = tokens.long() if isinstance(tokens, Tensor) else tokens  # (N,)
        self.n_starts = stop - self.start - block_size
        self.block_size = block_size
        self.generator = torch.Generator().manual_seed(seed)
        self._offsets = torch.arange(block_size + 1)  # (block + 1,)

    def get_batch(self, batch_size: int) -> tuple[Tensor, Tensor]:
        """``x, y`` of shape ``(B, block_size)`` each, windows drawn uniformly at random."""
        check_positive("batch_size", batch_size)
        starts = self.start + torch.randint(self.n_starts, (batch_size,), generator=self.generator)  # (B,)
        index = starts[:, None] + self._offsets  # (B, block + 1)
        if isinstance(self.tokens, Tensor):
            windows = self.tokens[index]
        else:
            windows = torch.from_numpy(self.tokens[index.numpy()].astype(np.int64))
        return windows[:, :-1].contiguous(), windows[:, 1:].contiguous()  # (B, block) each

    def state_dict(self) -> dict[str, Tensor]:
        """The generator state, so a resumed run draws the same windows."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.generator.set_state(state["generator"])
