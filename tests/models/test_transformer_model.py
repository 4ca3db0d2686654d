"""The encoder-decoder Transformer: cached decoding, padding, shared embeddings, bad input."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.models import Transformer, TransformerConfig
from attnlab.modules.positional import POSITIONAL_KINDS, LearnedPositionalEmbedding, RelativePositionBias

V, PAD = 13, 0


def make(kind: str = "sinusoidal", **kw) -> Transformer:
    torch.manual_seed(0)
    cfg = (
        dict(
            src_vocab_size=V,
            d_model=32,
            num_heads=4,
            num_encoder_layers=2,
            num_decoder_layers=2,
            d_ff=48,
            dropout=0.0,
            positional=kind,
            max_len=16,
        )
        | kw
    )
    model = Transformer.from_config(TransformerConfig(**cfg)).eval()
    for m in model.modules():  # make position tables matter as much as the tokens
        if isinstance(m, RelativePositionBias | LearnedPositionalEmbedding):
            torch.nn.init.normal_(m.embedding.weight, std=1.0)
    return model


def batch(b: int = 3, s: int = 7, t: int = 6, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(1, V, (b, s), generator=gen)
    src[0, 4:] = PAD  # a padded source row
    return src, torch.randint(1, V, (b, t), generator=gen)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("kind", POSITIONAL_KINDS)
def test_cached_decoding_equals_full_recomputation(kind, norm_first):
    model = make(kind, norm_first=norm_first)
    src, tgt = batch()
    full = model(src, tgt)  # (B, T, V)
    memory, src_mask = model.encode(src)
    cache = model.new_cache()
    steps = [
        model.decode(tgt[:, :2], memory, src_mask, cache=cache)
    ]  # a 2-token prefix, then 1 by 1
    steps += [
        model.decode(tgt[:, i : i + 1], memory, src_mask, cache=cache)
        for i in range(2, tgt.shape[1])
    ]
    assert cache.offset == tgt.shape[1]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-5)


@pytest.mark.parametrize("kind", POSITIONAL_KINDS)
def test_source_padding_is_invisible(kind):
    model = make(kind)
    src, tgt = batch()
    padded = torch.cat([src, torch.full((3, 4), PAD)], dim=1)  # same sentences, more padding
    torch.testing.assert_close(model(padded, tgt), model(src, tgt), rtol=0, atol=1e-5)


def test_cross_attention_weights_ignore_padding():
    model = make()
    src, tgt = batch()
    memory, src_mask = model.encode(src)
    logits, weights = model.decode(tgt, memory, src_mask, return_weights=True)
    assert logits.shape == (3, 6, V) and len(weights) == 2
    for w in weights:
        assert w.shape == (3, 4, 6, 7)  # (B, H, T, S)
        torch.testing.assert_close(w.sum(-1), torch.ones(3, 4, 6))
        assert torch.all(w[0, :, :, 4:] == 0)
    torch.testing.assert_close(logits, model(src, tgt), rtol=0, atol=1e-5)


def test_cache_reorder_follows_beam_search():
    model = make("rope")
    src, tgt = batch()
    memory, src_mask = model.encode(src)
    cache = model.new_cache()
    model.decode(tgt[:, :3], memory, src_mask, cache=cache)
    index = torch.tensor([2, 0, 0])
    cache.reorder(index)
    step = model.decode(tgt[index, 3:4], memory[index], src_mask[index], cache=cache)
    full = model(src[index], tgt[index, :4])[:, 3:4]
    torch.testing.assert_close(step, full, rtol=0, atol=1e-5)


def test_embeddings_are_scaled_by_sqrt_d_and_shared():
    model = make(share_embeddings=True)
    assert model.src_embed.weight is model.tgt_embed.weight is model.output.weight
    src, tgt = batch()
    seen = {}
    model.encoder.register_forward_pre_hook(lambda mod, args: seen.setdefault("x", args[0]))
    model(src, tgt)
    table = model.src_pos.absolute.table(src.shape[1]).float()  # (S, d)
    expected = model.src_embed.weight[src] * math.sqrt(32) + table
    torch.testing.assert_close(seen["x"], expected)
    unique = {p.data_ptr(): p.numel() for p in model.parameters()}  # the shared matrix once
    assert model.num_parameters() == sum(unique.values())
    assert model.num_parameters(exclude_embeddings=True) == model.num_parameters() - V * 32


def test_separate_vocabularies():
    model = make(tgt_vocab_size=21)
    src = torch.randint(0, V, (2, 5))
    tgt = torch.randint(0, 21, (2, 4))
    assert model(src, tgt).shape == (2, 4, 21)
    with pytest.raises(
        ValueError, match=r"src must be token ids < vocab_size=13, got a maximum of 20"
    ):
        model(tgt, tgt)


def test_bad_input_names_argument_expected_and_actual():
    model = make("learned")
    src, tgt = batch()
    with pytest.raises(
        ValueError, match=r"tgt_in must be token ids < vocab_size=13, got a maximum of 13"
    ):
        model(src, torch.full((3, 2), 13))
    with pytest.raises(ValueError, match=r"src must be token ids >= 0, got a minimum of -1"):
        model(torch.full((3, 2), -1), tgt)
    with pytest.raises(ValueError, match=r"tgt_in has batch size 2 but src has batch size 3"):
        model(src, tgt[:2])
    with pytest.raises(
        ValueError, match=r"src reaches length 17 but learned positions allow at most max_len=16"
    ):
        model(torch.ones(1, 17, dtype=torch.long), tgt[:1])
    memory, src_mask = model.encode(src)
    cache = model.new_cache()
    model.decode(tgt[:, :1].repeat(1, 16), memory, src_mask, cache=cache)
    with pytest.raises(ValueError, match=r"tgt reaches length 17 but .*max_len=16"):
        model.decode(tgt[:, :1], memory, src_mask, cache=cache)
    with pytest.raises(ValueError, match=r"must hold integer token ids, got dtype torch.float32"):
        model(src.float(), tgt)
    with pytest.raises(ValueError, match=r"src must have 2 dimensions"):
        model(src[0], tgt)
