"""Token-budget batching, collation, sharding and LM windows."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from attnlab.data import (
    Batch,
    CharTokenizer,
    LMDataset,
    TokenBatchSampler,
    TranslationDataset,
    collate,
    token_batches,
)

PAD, BOS, EOS = 0, 1, 2


def random_pairs(n: int, seed: int = 0, max_len: int = 30) -> list[tuple[list[int], list[int]]]:
    rng = random.Random(seed)

    def seq(lo: int) -> list[int]:
        return [rng.randrange(4, 50) for _ in range(rng.randint(lo, max_len))]

    return [(seq(1), seq(0)) for _ in range(n)]


def dataset(n: int = 300, seed: int = 0) -> TranslationDataset:
    pairs = random_pairs(n, seed)
    return TranslationDataset([s for s, _ in pairs], [t for _, t in pairs])


# --- collate ------------------------------------------------------------------------------


def test_collate_builds_teacher_forcing_tensors():
    examples = [([5, 6, 7], [8, 9]), ([10], [11, 12, 13, 14]), ([15, 16], [])]
    batch = collate(examples, pad_id=PAD, bos_id=BOS, eos_id=EOS)
    assert batch.src.tolist() == [[5, 6, 7], [10, 0, 0], [15, 16, 0]]
    assert batch.tgt_in.tolist() == [[1, 8, 9, 0, 0], [1, 11, 12, 13, 14], [1, 0, 0, 0, 0]]
    assert batch.tgt_out.tolist() == [[8, 9, 2, 0, 0], [11, 12, 13, 14, 2], [2, 0, 0, 0, 0]]
    assert batch.src_lengths.tolist() == [3, 1, 2]
    assert batch.tgt_lengths.tolist() == [3, 5, 1]
    assert batch.num_tokens == 9
    assert batch.src.dtype == batch.tgt_in.dtype == torch.long


def test_collate_shift_and_masks_agree_with_padding():
    data = dataset(40)
    batch = data.collate([data[i] for i in range(40)])
    real = batch.tgt_out != PAD  # pad id never occurs inside the sequences here
    assert real.sum(1).tolist() == batch.tgt_lengths.tolist()
    words = (torch.arange(real.shape[1]) < batch.tgt_lengths[:, None] - 1)[:, :-1]  # y_1..y_m
    assert torch.equal(batch.tgt_in[:, 1:][words], batch.tgt_out[:, :-1][words])  # shift by one
    assert batch.src_mask.shape == (40, 1, 1, batch.src.shape[1])
    assert torch.equal(batch.src_mask[:, 0, 0], batch.src != PAD)
    assert isinstance(batch.to("cpu"), Batch)


def test_collate_rejects_empty():
    with pytest.raises(ValueError, match="at least one"):
        collate([], pad_id=PAD, bos_id=BOS, eos_id=EOS)


def test_dataset_from_text_pairs_and_max_len():
    pairs = [("abc", "ab"), ("a", "abcdefgh"), ("ba", "c")]
    tok = CharTokenizer.train("abcdefgh")
    data = TranslationDataset.from_pairs(pairs, tok, tok)
    assert len(data) == 3 and data[0] == (tok.encode("abc"), tok.encode("ab"))
    assert data.lengths.tolist() == [3, 9, 2]
    short = TranslationDataset.from_pairs(pairs, tok, tok, max_len=5)
    assert len(short) == 2 and short.too_long == 1 and short[1] == data[2]


# --- bucketing ----------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 40), min_size=1, max_size=200),
    max_tokens=st.integers(40, 500),
)
def test_token_batches_respect_budget_and_cover_once(lengths, max_tokens):
    batches = token_batches(lengths, max_tokens)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert len(b) * max(lengths[i] for i in b) <= max_tokens


def test_token_batches_group_similar_lengths():
    lengths = [random.Random(1).randint(1, 50) for _ in range(1000)]
    batches = token_batches(lengths, 200)
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    assert padded < 1.05 * sum(lengths)  # little padding, because lengths are bucketed


def test_token_batches_reject_oversized_example():
    with pytest.raises(ValueError, match="example 1 needs 50 tokens but max_tokens is 40"):
        token_batches([3, 50], 40)


def test_padded_tensors_respect_the_budget():
    data = dataset(300)
    sampler = TokenBatchSampler(data.lengths, max_tokens=256, seed=3)
    loader = DataLoader(data, batch_sampler=sampler, collate_fn=data.collate)
    seen = 0
    for batch in loader:
        b, s = batch.src.shape
        t = batch.tgt_in.shape[1]
        assert b * max(s, t) <= 256
        seen += b
    assert seen == len(data)


# --- epochs, seeds, shards ----------------------------------------------------------------


def epoch_batches(sampler: TokenBatchSampler, epoch: int) -> list[list[int]]:
    sampler.set_epoch(epoch)
    return list(sampler)


def test_every_pair_once_per_epoch_and_reproducible_shuffle():
    lengths = dataset(500).lengths
    a = TokenBatchSampler(lengths, max_tokens=300, seed=7)
    b = TokenBatchSampler(lengths, max_tokens=300, seed=7)
    c = TokenBatchSampler(lengths, max_tokens=300, seed=8)
    for epoch in range(3):
        got = epoch_batches(a, epoch)
        assert sorted(i for batch in got for i in batch) == list(range(500))
        assert got == epoch_batches(b, epoch)  # same seed and epoch: same order
    assert epoch_batches(a, 0) != epoch_batches(a, 1)  # a new order each epoch
    assert epoch_batches(a, 0) != epoch_batches(c, 0)  # the seed matters
    assert sorted(map(sorted, epoch_batches(a, 0))) == sorted(map(sorted, epoch_batches(a, 1)))


def test_no_shuffle_is_length_order():
    lengths = dataset(100).lengths
    got = list(TokenBatchSampler(lengths, max_tokens=200, shuffle=False))
    flat = [lengths[i] for batch in got for i in batch]
    assert flat == sorted(flat)


@pytest.mark.parametrize("world_size", [2, 3, 4, 7])
def test_shards_are_disjoint_complete_and_equal(world_size):
    lengths = dataset(250, seed=world_size).lengths
    shards = [
        TokenBatchSampler(lengths, 300, seed=5, rank=r, world_size=world_size)
        for r in range(world_size)
    ]
    for epoch in range(2):
        per_rank = [epoch_batches(s, epoch) for s in shards]
        assert len({len(batches) for batches in per_rank}) == 1  # same count on every rank
        assert all(len(batches) == len(s) for batches, s in zip(per_rank, shards, strict=True))
        indices = [i for batches in per_rank for batch in batches for i in batch]
        assert sorted(indices) == list(range(250))  # disjoint and complete
        for batches in per_rank:
            for batch in batches:
                assert len(batch) * max(lengths[i] for i in batch) <= 300


def test_shard_arguments_are_checked():
    with pytest.raises(ValueError, match="rank must be in"):
        TokenBatchSampler([3, 4], 10, rank=2, world_size=2)
    with pytest.raises(ValueError, match="world_size=3"):
        TokenBatchSampler([3, 4], 10, world_size=3)


# --- language-model windows ---------------------------------------------------------------


def test_lm_windows_are_contiguous_and_shifted():
    tokens = torch.arange(1000)
    data = LMDataset(tokens, block_size=16, seed=0)
    x, y = data.get_batch(32)
    assert x.shape == y.shape == (32, 16)
    assert torch.equal(y, x + 1)  # y is x shifted by one position
    assert torch.equal(x - x[:, :1], torch.arange(16).expand(32, 16))  # contiguous windows
    assert int(y.max()) <= 999 and int(x.min()) >= 0


def test_lm_windows_reach_both_ends():
    data = LMDataset(torch.arange(10), block_size=8, seed=0)  # only starts 0 and 1 fit
    starts = {int(data.get_batch(1)[0][0, 0]) for _ in range(50)}
    assert starts == {0, 1}


def test_lm_batches_are_seeded_and_resumable():
    tokens = torch.randint(0, 65, (5000,), generator=torch.Generator().manual_seed(0))
    a, b = LMDataset(tokens, 32, seed=1), LMDataset(tokens, 32, seed=1)
    assert all(torch.equal(a.get_batch(4)[0], b.get_batch(4)[0]) for _ in range(3))
    state = a.state_dict()
    expected = a.get_batch(4)
    fresh = LMDataset(tokens, 32, seed=99)
    fresh.load_state_dict(state)
    assert all(torch.equal(u, v) for u, v in zip(fresh.get_batch(4), expected, strict=True))


def test_lm_dataset_rejects_short_streams():
    with pytest.raises(ValueError, match="tokens has 8 tokens but block_size \\+ 1 = 9"):
        LMDataset(torch.arange(8), block_size=8)
    with pytest.raises(ValueError, match="tokens must have 1 dimensions"):
        LMDataset(torch.zeros(2, 8, dtype=torch.long), block_size=4)
