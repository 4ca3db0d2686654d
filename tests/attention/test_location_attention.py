"""LocationAwareScore (Chorowski et al. 2015, eqs. 8-9) against a float64 re-computation with
explicit loops, the additive score it reduces to, and the property that makes it
location-aware: with identical keys, shifting the previous alignment shifts the scores."""

from __future__ import annotations

import pytest
import torch

from attnlab.attention import AdditiveScore, LocationAwareScore, masked_softmax


def make(seed: int = 0, **kw) -> LocationAwareScore:
    torch.manual_seed(seed)
    return LocationAwareScore(5, 7, 6, **{"filters": 3, "kernel_size": 5, **kw}).double()


def reference(score: LocationAwareScore, q, k, prev):
    """e_{i,j} = wᵀ tanh(W s + V h_j + U f_{i,j} + b), f_{i,j,c} = Σ_t F_{c,t} α_{i, j+t-w//2}."""
    F_, half = score.conv.weight[:, 0], score.conv.kernel_size[0] // 2  # (r, w)
    W, V, U, b, w = score.w_q.weight, score.w_k.weight, score.w_f.weight, score.w_f.bias, score.w_v.weight[0]
    B, n_q, n_k = prev.shape
    out = torch.zeros(B, n_q, n_k, dtype=torch.float64)
    for bi in range(B):
        for i in range(n_q):
            for j in range(n_k):
                f = torch.zeros(F_.shape[0], dtype=torch.float64)
                for t in range(F_.shape[1]):
                    pos = j + t - half
                    if 0 <= pos < n_k:
                        f += F_[:, t] * prev[bi, i, pos]
                out[bi, i, j] = w @ torch.tanh(W @ q[bi, i] + V @ k[bi, j] + U @ f + b)
    return out


def test_equals_a_float64_recomputation_of_eqs_8_and_9():
    score = make()
    q, k = torch.randn(2, 3, 5, dtype=torch.float64), torch.randn(2, 8, 7, dtype=torch.float64)
    prev = torch.softmax(torch.randn(2, 3, 8, dtype=torch.float64), dim=-1)
    torch.testing.assert_close(score(q, k, prev), reference(score, q, k, prev))


def test_without_location_features_it_is_the_additive_score():
    score = make()
    with torch.no_grad():
        score.conv.weight.zero_()
        score.w_f.bias.zero_()
    additive = AdditiveScore(5, 7, 6).double()
    shared = ("w_q", "w_k", "w_v")
    additive.load_state_dict({k: v for k, v in score.state_dict().items() if k.split(".")[0] in shared})
    q, k = torch.randn(4, 2, 5, dtype=torch.float64), torch.randn(4, 9, 7, dtype=torch.float64)
    prev = torch.softmax(torch.randn(4, 2, 9, dtype=torch.float64), dim=-1)
    torch.testing.assert_close(score(q, k, prev), additive(q, k))


def test_with_identical_keys_shifting_the_previous_alignment_shifts_the_scores():
    score = make(kernel_size=3)
    n_k = 12
    q = torch.randn(1, 1, 5, dtype=torch.float64)
    k = torch.randn(1, 1, 7, dtype=torch.float64).expand(1, n_k, 7)  # content cannot tell them apart
    prev = torch.zeros(1, 1, n_k, dtype=torch.float64)
    prev[..., 4] = 1.0
    shifted = torch.roll(prev, 3, dims=-1)
    e, e_shifted = score(q, k, prev), score(q, k, shifted)
    torch.testing.assert_close(e_shifted[..., 4:], e[..., 1:-3])  # away from the zero-padded ends
    assert not torch.allclose(e, e_shifted)  # and the location changes the weights


def test_padded_positions_get_zero_weight_after_masked_softmax():
    score = make()
    q, k = torch.randn(2, 1, 5, dtype=torch.float64), torch.randn(2, 6, 7, dtype=torch.float64)
    valid = torch.tensor([[True] * 6, [True] * 4 + [False] * 2]).unsqueeze(1)  # (2, 1, 6)
    prev = valid.double() / valid.sum(-1, keepdim=True)
    weights = masked_softmax(score(q, k, prev), valid)
    assert torch.equal(weights[1, 0, 4:], torch.zeros(2, dtype=torch.float64))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 1, dtype=torch.float64))


def test_gradients_reach_the_filters():
    score = make()
    q, k = torch.randn(1, 2, 5, dtype=torch.float64), torch.randn(1, 6, 7, dtype=torch.float64)
    prev = torch.softmax(torch.randn(1, 2, 6, dtype=torch.float64), dim=-1).requires_grad_()
    assert torch.autograd.gradcheck(lambda p: score(q, k, p), (prev,))
    score(q, k, prev).sum().backward()
    assert score.conv.weight.grad.abs().sum() > 0 and score.w_f.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("kwargs, match", [
    ({"kernel_size": 4}, "kernel_size must be odd"),
    ({"filters": 0}, "filters"),
])
def test_bad_settings_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LocationAwareScore(5, 7, 6, **kwargs)


def test_a_previous_alignment_of_the_wrong_shape_is_named():
    score = make()
    q, k = torch.randn(2, 1, 5, dtype=torch.float64), torch.randn(2, 6, 7, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"previous must have the scores' shape"):
        score(q, k, torch.zeros(2, 1, 5, dtype=torch.float64))
