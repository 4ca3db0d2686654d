"""The attention graphs of an encoder-decoder and of a recurrent decoder (rolled out by hand),
the recorded weights against the models' own ``return_weights``, gradient × attention against
finite differences of a tiny captioner in float64, integrated gradients' completeness and its
closed form on a quadratic, and the pointing-game scores on hand-made vectors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from attnlab.explain import (
    attention_rollout,
    encoder_decoder_graph,
    gradient_x_attention,
    integrated_gradients,
    mass_on_truth,
    overlap,
    per_key,
    pointing_hit,
    recording_attention,
    recurrent_graph,
    uniform_pointing,
)
from attnlab.models import ShowAttendTell, Transformer
from attnlab.models.show_attend_tell import ShowAttendTellConfig
from attnlab.models.transformer import TransformerConfig


def softmax_rows(seed: int, *shape: int) -> torch.Tensor:
    return torch.softmax(2 * torch.randn(*shape, generator=torch.Generator().manual_seed(seed)), dim=-1)


# ----------------------------------------------------------------------------- graphs
def test_a_recurrent_decoders_rollout_is_the_running_half_mix_of_its_reads():
    alphas, start = softmax_rows(0, 5, 6), torch.full((6,), 1 / 6)
    rolled = attention_rollout(recurrent_graph(alphas, start))[6]  # the state's row
    expected = 0.5 * start.double().numpy()  # the first map: the state reads ā
    for alpha in alphas.double().numpy():
        expected = 0.5 * alpha + 0.5 * expected
    assert np.allclose(rolled[:6], expected, atol=1e-12)
    assert rolled[6] == pytest.approx(0.5 ** 6)  # what the state kept of itself
    graph = recurrent_graph(alphas)
    assert graph.shape == (5, 7, 7)
    assert np.array_equal(graph[:, :6, :6], np.broadcast_to(np.eye(6), (5, 6, 6)))  # locations stay


def test_an_encoder_decoder_graph_reads_the_sources_through_the_cross_attention():
    sources, targets = 3, 2
    cross = softmax_rows(1, 1, 2, targets, sources)
    own_source, own_target = torch.eye(sources).expand(1, 2, -1, -1), torch.eye(targets).expand(1, 2, -1, -1)
    maps = encoder_decoder_graph(own_source, own_target, cross)
    assert maps.shape == (3, 5, 5) and np.allclose(maps.sum(-1), 1.0)
    rolled = attention_rollout(maps)
    mean = cross.double().mean(1)[0].numpy()  # (T, S)
    for t in range(targets):
        assert np.allclose(rolled[sources + t, :sources], 0.5 * mean[t])
        assert rolled[sources + t, sources + t] == pytest.approx(0.5)
    with pytest.raises(ValueError, match=r"cross must be \(1, H, 2, 3\)"):
        encoder_decoder_graph(torch.eye(3)[None, None], torch.eye(2)[None, None], torch.ones(1, 1, 3, 2))


# ----------------------------------------------------------------------------- recording
def tiny_transformer() -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, num_heads=2, d_ff=32,
                               num_encoder_layers=2, num_decoder_layers=2, dropout=0.0)
    return Transformer(config).eval()


def tiny_captioner() -> ShowAttendTell:
    torch.manual_seed(0)
    config = ShowAttendTellConfig(vocab_size=12, image_size=16, conv_channels=(4, 4), feature_dim=8,
                                  embed_dim=8, hidden_dim=16, attention_dim=8, dropout=0.0)
    return ShowAttendTell(config).eval()


def test_recorded_weights_are_the_models_own_and_change_nothing():
    model = tiny_transformer()
    src, tgt = torch.tensor([[3, 4, 5, 6, 7]]), torch.tensor([[1, 8, 9, 10]])
    memory, mask = model.encode(src)
    plain, cross = model.decode(tgt, memory, mask, return_weights=True)
    with recording_attention(model.stack.encoder, model.stack.decoder) as (encoder, decoder):
        memory2, mask2 = model.encode(src)
        logits = model.decode(tgt, memory2, mask2)  # asked for no weights: gets none
    assert torch.allclose(memory, memory2, atol=1e-6) and torch.allclose(logits, plain, atol=1e-6)
    assert len(encoder) == 1 and len(encoder[0]) == 2 and encoder[0][0].shape == (1, 2, 5, 5)
    for (own, recorded), expected in zip(decoder[0], cross, strict=True):
        assert own.shape == (1, 2, 4, 4) and torch.allclose(recorded, expected, atol=1e-6)
    captioner, image = tiny_captioner(), torch.rand(1, 1, 16, 16)
    _, (alphas,) = captioner(image, torch.tensor([[1, 5, 6]]), return_weights=True)
    with recording_attention(captioner.attention) as (steps,):
        captioner(image, torch.tensor([[1, 5, 6]]))
    assert torch.allclose(torch.stack(steps, 1), alphas[:, 0], atol=1e-7)


# ----------------------------------------------------------------------------- gradients
def test_gradient_x_attention_equals_finite_differences_on_a_tiny_captioner():
    model = tiny_captioner().double()
    image, tgt = torch.rand(1, 1, 16, 16, dtype=torch.float64), torch.tensor([[1, 5, 6, 7]])

    def output(scale: tuple[int, int, float] | None = None) -> tuple[torch.Tensor, list]:
        calls = []

        def hook(module, args, alpha):
            calls.append(alpha)
            if scale is not None and len(calls) - 1 == scale[0]:
                alpha = alpha.clone()
                alpha[:, scale[1]] *= 1 + scale[2]
            return alpha

        handle = model.attention.register_forward_hook(hook)
        try:
            return torch.log_softmax(model(image, tgt)[0, -1], -1)[7], calls
        finally:
            handle.remove()

    f, calls = output()
    terms = gradient_x_attention(f, calls)
    eps = 1e-5
    for step, cell in [(0, 0), (1, 5), (2, 9), (3, 15), (3, 3)]:
        estimate = (output((step, cell, eps))[0] - output((step, cell, -eps))[0]) / (2 * eps)
        assert float(terms[step][0, cell]) == pytest.approx(float(estimate.detach()), rel=1e-5, abs=1e-10)
    f, calls = output()
    assert torch.allclose(per_key(terms), sum(terms), atol=1e-12)  # (1, L): every step's term for each cell
    layers = [torch.ones(1, 2, 3, 4), 2 * torch.ones(1, 2, 3, 4)]  # (B, H, n_q, n_k): heads and rows summed
    assert torch.equal(per_key(layers), torch.full((1, 4), 18.0))


def test_integrated_gradients_of_a_quadratic_is_its_closed_form():
    x = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
    ig = integrated_gradients(lambda p: (p ** 2).sum(-1), x, steps=3)  # ∫ 2κx·x dκ = x² (midpoint exact)
    assert torch.allclose(ig.attributions[0], x ** 2) and abs(float(ig.gap[0])) < 1e-12


def test_integrated_gradients_are_complete_on_a_small_network():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2)).double()
    x, baseline = torch.randn(6, dtype=torch.float64), torch.randn(6, dtype=torch.float64)
    ig = integrated_gradients(net, x, baseline, steps=256, batch=100)
    delta = net(x) - net(baseline)
    assert torch.allclose(ig.ends[:, 1] - ig.ends[:, 0], delta)
    assert torch.allclose(ig.attributions.sum(-1), delta, atol=1e-4)  # Σ IG = f(x) − f(x')
    single = integrated_gradients(lambda p: net(p)[:, 1], x, baseline, steps=256)
    assert torch.allclose(single.attributions[0], ig.attributions[1], atol=1e-12)
    with pytest.raises(ValueError, match=r"baseline has shape \(5\) but x has \(6\)"):
        integrated_gradients(net, x, torch.zeros(5))
    with pytest.raises(ValueError, match=r"f must map a batch of 4 inputs"):
        integrated_gradients(lambda p: p.sum(), x, steps=4)


# ----------------------------------------------------------------------------- scores
def test_pointing_mass_and_overlap_on_hand_made_vectors():
    truth = torch.tensor([False, True, True, False])
    assert pointing_hit(torch.tensor([0.1, 0.5, 0.2, 0.2]), truth) == 1.0
    assert pointing_hit(torch.tensor([0.5, 0.1, 0.2, 0.2]), truth) == 0.0
    assert pointing_hit(torch.tensor([0.3, 0.1, 0.3, 0.3]), truth) == pytest.approx(1 / 3)  # a three-way tie
    assert pointing_hit(torch.ones(4), truth) == uniform_pointing(truth) == 0.5
    assert mass_on_truth(torch.tensor([-1.0, 1.0, 2.0, 1.0]), truth) == pytest.approx(0.75)  # no negatives
    assert mass_on_truth(-torch.ones(4), truth) == 0.0
    half, one = torch.tensor([0.5, 0.5, 0.0, 0.0]), torch.tensor([0.0, 1.0, 0.0, 0.0])
    assert overlap(half, one) == pytest.approx(0.5)
    assert overlap(torch.tensor([2.0, 0.0]), torch.tensor([1.0, 0.0])) == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"truth has shape \(3\) but relevance has \(4\)"):
        pointing_hit(torch.ones(4), torch.ones(3, dtype=torch.bool))
