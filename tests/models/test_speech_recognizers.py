"""The recognizers (listen-attend-spell with the additive or the location-aware score, the
speech Transformer): alignments that sum to one over an utterance's real frames and give its
padding weight 0, outputs unchanged by what the padded frames hold, a causal decoder without
look-ahead, greedy and beam search through attnlab.generation independent of the batch, the
same transcript after save and load, and one-line errors."""

from __future__ import annotations

import pytest
import torch

from attnlab.generation import beam_search, greedy_search
from attnlab.models import (
    ListenAttendSpell,
    ListenAttendSpellConfig,
    SpeechTransformer,
    SpeechTransformerConfig,
    load_pretrained,
)

V, BOS, EOS, MELS = 16, 1, 2, 12
KINDS = ["additive", "location", "transformer"]


def tiny(kind: str, seed: int = 0):
    torch.manual_seed(seed)
    if kind == "transformer":
        config = SpeechTransformerConfig(V, V, n_mels=MELS, d_model=16, num_heads=2, d_ff=32,
                                         num_encoder_layers=2, num_decoder_layers=2, conv_channels=4,
                                         dropout=0.0)
        return SpeechTransformer(config).eval()
    config = ListenAttendSpellConfig(V, V, n_mels=MELS, embed_dim=8, encoder_dim=8, hidden_dim=16,
                                     attention_dim=8, score=kind, location_filters=3, location_kernel=5,
                                     listener_layers=2, dropout=0.0)
    return ListenAttendSpell(config).eval()


def utterances(lengths=(33, 20, 9), seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), max(lengths), MELS, generator=g)
    tgt = torch.randint(3, V, (len(lengths), 6), generator=g)
    tgt[:, 0] = BOS
    return x, torch.tensor(lengths), tgt


def cross_weights(model, x, lengths, tgt) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    memory, mask = model.encode(x, lengths)
    logits, weights = model.decode(tgt, memory, mask, return_weights=True)
    return logits, weights, mask


@pytest.mark.parametrize("kind", KINDS)
def test_alignments_sum_to_one_over_the_real_frames_and_ignore_the_padding(kind):
    model = tiny(kind)
    x, lengths, tgt = utterances()
    with torch.no_grad():
        logits, weights, mask = cross_weights(model, x, lengths, tgt)
        assert mask.sum(1).tolist() == [-(-n // model.reduction) for n in lengths.tolist()]
        for w in weights:  # (B, H, T, S) a layer
            torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:3]), rtol=0, atol=1e-5)
            assert w.masked_select(~mask[:, None, None, :].expand_as(w)).abs().max() == 0
        noisy = x.clone()
        for row, n in enumerate(lengths.tolist()):
            noisy[row, n:] = 50 * torch.randn_like(noisy[row, n:])
        logits2, weights2, _ = cross_weights(model, noisy, lengths, tgt)
    torch.testing.assert_close(logits2, logits, rtol=0, atol=0)
    for w, w2 in zip(weights, weights2, strict=True):
        torch.testing.assert_close(w2, w, rtol=0, atol=0)


def test_the_transformers_decoder_never_looks_ahead():
    model = tiny("transformer")
    x, lengths, tgt = utterances()
    changed = tgt.clone()
    changed[:, 4:] = (changed[:, 4:] + 5) % (V - 3) + 3
    with torch.no_grad():
        a, b = model(x, lengths, tgt), model(x, lengths, changed)
    torch.testing.assert_close(a[:, :4], b[:, :4], rtol=0, atol=1e-6)  # positions before the change
    assert (a[:, 4:] - b[:, 4:]).abs().max() > 1e-4  # the changed positions do change


@pytest.mark.parametrize("kind", KINDS)
def test_decoding_a_batch_gives_each_utterance_what_it_gives_alone(kind):
    model = tiny(kind)
    x, lengths, _ = utterances()
    ends = dict(bos_id=BOS, eos_id=EOS, max_new_tokens=8)
    greedy = greedy_search(model, (x, lengths), **ends)
    beams = [h[0].tokens for h in beam_search(model, (x, lengths), beam_size=3, **ends)]
    for row, n in enumerate(lengths.tolist()):
        alone = x[row : row + 1, :n]
        assert greedy_search(model, alone, **ends) == [greedy[row]]  # a tensor alone: no lengths
        assert [h[0].tokens for h in beam_search(model, alone, beam_size=3, **ends)] == [beams[row]]


@pytest.mark.parametrize("kind", KINDS)
def test_save_and_load_give_the_same_transcripts(kind, tmp_path):
    model = tiny(kind)
    x, lengths, _ = utterances()
    before = greedy_search(model, (x, lengths), bos_id=BOS, eos_id=EOS, max_new_tokens=8)
    model.save_pretrained(tmp_path / "ckpt")
    loaded = load_pretrained(tmp_path / "ckpt")
    assert type(loaded) is type(model) and loaded.config == model.config
    assert greedy_search(loaded, (x, lengths), bos_id=BOS, eos_id=EOS, max_new_tokens=8) == before


@pytest.mark.parametrize("kind", ["additive", "transformer"])
@pytest.mark.parametrize("features, lengths, message", [
    (torch.randn(2, 10, MELS + 1), None, "n_mels=12"),
    (torch.randn(2, 10, MELS), torch.tensor([10, 11]), r"lengths must be in \[1, F=10\]"),
    (torch.randn(2, 10, MELS), torch.tensor([3]), "lengths must be"),
    (torch.randn(10, MELS), None, "features"),
])
def test_bad_features_are_one_line_errors(kind, features, lengths, message):
    with pytest.raises(ValueError, match=message):
        tiny(kind).encode(features, lengths)


def test_a_recognizer_has_one_vocabulary():
    with pytest.raises(ValueError, match="one vocabulary"):
        ListenAttendSpellConfig(V, V + 1)
    with pytest.raises(ValueError, match="one vocabulary"):
        SpeechTransformerConfig(V, V, share_embeddings=False)


@pytest.mark.parametrize("kind", ["additive", "transformer"])
def test_a_recognizer_is_not_exported_as_a_translator(kind, tmp_path):
    from attnlab.interop.export import save_hf

    with pytest.raises(ValueError, match="has no Hugging Face class"):
        save_hf(tiny(kind), tmp_path / "hf")


def test_the_transformers_frames_reach_the_positions_at_unit_scale():
    model = tiny("transformer")
    x, lengths, _ = utterances()
    seen = {}
    model.src_pos.add = lambda h, offset: seen.setdefault("h", h) + 0  # what the positions are added to
    _, mask = model.encode(x * 7.0, lengths)
    frames = seen["h"][mask]  # (real frames, d): each normalised, whatever the features' scale
    assert len(frames) == sum((n + 3) // 4 for n in lengths.tolist())
    torch.testing.assert_close(frames.mean(-1), torch.zeros(len(frames)), atol=1e-5, rtol=0)
    torch.testing.assert_close(frames.var(-1, unbiased=False), torch.ones(len(frames)), atol=1e-3, rtol=0)
