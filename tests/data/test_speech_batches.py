"""A recognizer's batches: SpecAugment's masks inside their bounds and decided by the seed, the
utterance untouched outside them; padded features with their lengths and the character targets
(bos … / … eos) of each transcript; a shuffled epoch holding every utterance once."""

from __future__ import annotations

import pytest
import torch

from attnlab.data.speech import SpecAugment, SpeechSet, pad_features
from attnlab.data.tokenizers import CharTokenizer

MASKS = SpecAugment(freq_masks=2, freq_width=5, time_masks=3, time_width=12, time_ratio=0.2)


def masked(features: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    return out.ne(features)  # where a value changed (features are never exactly 0)


@pytest.mark.parametrize("frames", [7, 40, 200])
def test_the_masks_stay_within_their_bounds(frames):
    g = torch.Generator().manual_seed(frames)
    for _ in range(20):
        spans = MASKS.spans(frames, 20, g)
        assert [a for a, _, _ in spans] == [1, 1, 0, 0, 0]
        for axis, start, width in spans:
            size, widest = (20, 5) if axis == 1 else (frames, min(12, int(0.2 * frames)))
            assert 0 <= width <= widest and 0 <= start and start + width <= size


def test_the_masks_zero_exactly_their_spans_and_the_seed_decides_them():
    x = torch.rand(60, 20) + 1.0
    out = MASKS(x, torch.Generator().manual_seed(7))
    expected = torch.zeros(60, 20, dtype=torch.bool)
    for axis, start, width in MASKS.spans(60, 20, torch.Generator().manual_seed(7)):
        if axis == 0:
            expected[start:start + width] = True
        else:
            expected[:, start:start + width] = True
    assert torch.equal(masked(x, out), expected) and out[expected].eq(0).all()
    assert torch.equal(MASKS(x, torch.Generator().manual_seed(7)), out)
    others = [MASKS(x, torch.Generator().manual_seed(s)) for s in range(8, 12)]
    assert any(not torch.equal(o, out) for o in others)
    assert torch.equal(SpecAugment(0, 5, 0, 12)(x, torch.Generator()), x)


def test_bad_mask_settings_are_named():
    with pytest.raises(ValueError, match="time_ratio"):
        SpecAugment(time_ratio=1.5)
    with pytest.raises(ValueError, match="freq_width"):
        SpecAugment(freq_width=-1)


def speech_set(frames=(9, 4, 12, 6, 3)) -> SpeechSet:
    tok = CharTokenizer("abc ")
    feats = [torch.full((n, 3), float(i + 1)) for i, n in enumerate(frames)]
    texts = ["a", "ab c", "cab", "b", "ccc a"]
    return SpeechSet(feats, texts[: len(frames)], tok)


def test_a_batch_holds_padded_features_lengths_and_the_character_targets():
    data = speech_set()
    batch = data.collate([0, 1])
    assert batch.features.shape == (2, 9, 3) and batch.lengths.tolist() == [9, 4]
    assert batch.features[1, 4:].eq(0).all() and batch.features[1, :4].eq(2).all()
    tok = CharTokenizer("abc ")
    ids = tok.encode("ab c")
    assert batch.tgt_in[1].tolist() == [tok.bos_id, *ids]
    assert batch.tgt_out[1].tolist() == [*ids, tok.eos_id]
    assert batch.tgt_in[0].tolist() == [tok.bos_id, *tok.encode("a"), 0, 0, 0]
    features, lengths = pad_features(data.features[2:4])
    assert features.shape == (2, 12, 3) and lengths.tolist() == [12, 6]


def test_a_shuffled_epoch_holds_every_utterance_once_in_a_seeded_order():
    data = speech_set()

    def epoch(seed):
        return [b.lengths.tolist() for b in data.batches(2, shuffle=True, seed=seed, augment=MASKS)]

    first = epoch(3)
    assert sorted(n for b in first for n in b) == sorted(data.frames())
    assert epoch(3) == first
    assert [b.lengths.tolist() for b in data.batches(2)] == [[9, 4], [12, 6], [3]]


@pytest.mark.parametrize("features", [[], [torch.zeros(0, 3)], [torch.zeros(3)]])
def test_padding_refuses_no_utterance_and_empty_ones(features):
    with pytest.raises(ValueError, match=r"pad_features needs utterances of \(F >= 1, D\) features"):
        pad_features(features)
