"""NTM addressing (Graves et al. 2014, eqs. 2-9) against a float64 NumPy re-computation."""

import numpy as np
import pytest
import torch

from attnlab.attention.addressing import (
    address,
    content_addressing,
    erase_and_add,
    interpolate,
    read_memory,
    sharpen,
    shift_weighting,
)

B, H, N, M = 2, 3, 7, 5


def numpy_address(memory, previous, key, beta, gate, shift, gamma):
    """Eqs. 5-9 written out element by element in float64."""
    out = np.zeros((B, H, N))
    reach = shift.shape[-1] // 2
    for b in range(B):
        for h in range(H):
            cos = [key[b, h] @ memory[b, i] / (np.linalg.norm(key[b, h]) * np.linalg.norm(memory[b, i]))
                   for i in range(N)]
            e = np.exp(beta[b, h] * np.array(cos))
            wc = e / e.sum()
            wg = gate[b, h] * wc + (1 - gate[b, h]) * previous[b, h]
            ws = np.zeros(N)
            for i in range(N):
                for j in range(N):
                    offset = (i - j) % N
                    offset = offset - N if offset > N // 2 else offset  # into −N/2 … N/2
                    if -reach <= offset <= reach:
                        ws[i] += wg[j] * shift[b, h, offset + reach]
            wp = ws ** gamma[b, h]
            out[b, h] = wp / wp.sum()
    return out


def numpy_shift(w, s):
    """``w̃_i = Σ_j w_j s_{(i-j) mod N}`` with s indexed by offsets −k … k."""
    reach = s.shape[-1] // 2
    out = np.zeros_like(w)
    for i in range(w.shape[-1]):
        for offset in range(-reach, reach + 1):
            out[..., i] += w[..., (i - offset) % w.shape[-1]] * s[..., offset + reach]
    return out


def random_inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    memory = torch.randn(B, N, M, generator=g, dtype=torch.float64)
    previous = torch.softmax(torch.randn(B, H, N, generator=g, dtype=torch.float64), -1)
    key = torch.randn(B, H, M, generator=g, dtype=torch.float64)
    beta = torch.rand(B, H, generator=g, dtype=torch.float64) * 5
    gate = torch.rand(B, H, generator=g, dtype=torch.float64)
    shift = torch.softmax(torch.randn(B, H, 3, generator=g, dtype=torch.float64), -1)
    gamma = 1 + torch.rand(B, H, generator=g, dtype=torch.float64) * 3
    return memory, previous, key, beta, gate, shift, gamma


def test_shift_matches_numpy_and_wraps():
    w = torch.softmax(torch.randn(B, H, N, dtype=torch.float64), -1)
    s = torch.softmax(torch.randn(B, H, 5, dtype=torch.float64), -1)
    np.testing.assert_allclose(shift_weighting(w, s).numpy(), numpy_shift(w.numpy(), s.numpy()), atol=1e-12)
    last = torch.zeros(1, 1, N, dtype=torch.float64)
    last[..., -1] = 1
    forward_one = torch.tensor([[[0.0, 0.0, 1.0]]], dtype=torch.float64)  # all mass on +1
    moved = shift_weighting(last, forward_one)
    assert moved[0, 0, 0] == 1 and moved.sum() == 1  # the last location wraps round to the first


def test_address_chain_matches_float64_numpy():
    inputs = random_inputs()
    memory, previous, key, beta, gate, shift, gamma = inputs
    content = content_addressing(memory, key, beta)
    cos = np.einsum("bhm,bnm->bhn", key.numpy(), memory.numpy())
    cos /= np.linalg.norm(key.numpy(), axis=-1)[..., None] * np.linalg.norm(memory.numpy(), axis=-1)[:, None]
    expected = np.exp(beta.numpy()[..., None] * cos)
    np.testing.assert_allclose(content.numpy(), expected / expected.sum(-1, keepdims=True), atol=1e-12)
    wg = gate.numpy()[..., None] * content.numpy() + (1 - gate.numpy()[..., None]) * previous.numpy()
    np.testing.assert_allclose(interpolate(content, previous, gate).numpy(), wg, atol=1e-12)
    ws = numpy_shift(wg, shift.numpy())
    wp = ws ** gamma.numpy()[..., None]
    want = wp / wp.sum(-1, keepdims=True)
    np.testing.assert_allclose(address(*inputs).numpy(), want, atol=1e-9)
    by_element = numpy_address(*(x.numpy() for x in inputs))
    np.testing.assert_allclose(address(*inputs).numpy(), by_element, atol=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_every_weighting_is_a_distribution(seed):
    inputs = [x.float() for x in random_inputs(seed)]
    memory, previous, key, beta, gate, shift, gamma = inputs
    for w in (content_addressing(memory, key, beta), interpolate(previous, previous, gate),
              shift_weighting(previous, shift), sharpen(previous, gamma), address(*inputs)):
        assert (w >= 0).all()
        torch.testing.assert_close(w.sum(-1), torch.ones(B, H))


def test_sharpen_with_gamma_one_is_identity_and_larger_gamma_sharpens():
    w = torch.softmax(torch.randn(B, H, N, dtype=torch.float64), -1)
    torch.testing.assert_close(sharpen(w, torch.ones(B, H, dtype=torch.float64)), w, atol=1e-10, rtol=0)
    sharper = sharpen(w, torch.full((B, H), 4.0, dtype=torch.float64))
    assert (sharper.max(-1).values > w.max(-1).values).all()
    assert (sharper.argmax(-1) == w.argmax(-1)).all()


def test_sharpen_has_finite_gradients_at_zero_weights():
    w = torch.zeros(1, 1, N, dtype=torch.float64)
    w[..., 2] = 1
    w.requires_grad_(True)
    gamma = torch.full((1, 1), 2.0, dtype=torch.float64, requires_grad=True)
    (sharpen(w, gamma) * torch.arange(N)).sum().backward()
    assert torch.isfinite(w.grad).all() and torch.isfinite(gamma.grad).all()


def test_sharpen_of_a_flat_weighting_with_a_large_gamma_stays_a_distribution():
    # float32 as in training: (1/128)^25 underflows to 0 for every location, so w^γ / Σ w^γ would
    # be 0 / 0 (the NaN that stopped a repeat-copy run at step 7,768); the log-space form is exact.
    w = torch.softmax(0.1 * torch.randn(2, 1, 128, generator=torch.Generator().manual_seed(0)), -1)
    w.requires_grad_(True)
    gamma = torch.tensor([[21.0], [60.0]], requires_grad=True)
    sharp = sharpen(w, gamma)
    assert torch.isfinite(sharp).all()
    torch.testing.assert_close(sharp.sum(-1), torch.ones(2, 1))
    expected = w.double() ** gamma.double()[..., None]
    expected = expected / expected.sum(-1, keepdim=True)
    torch.testing.assert_close(sharp.double(), expected, atol=1e-5, rtol=1e-4)
    (sharp * torch.arange(128)).sum().backward()
    assert torch.isfinite(w.grad).all() and torch.isfinite(gamma.grad).all()


def test_erase_with_one_and_one_hot_weighting_clears_exactly_one_row():
    memory = torch.randn(B, N, M)
    w = torch.zeros(B, 1, N)
    w[:, 0, 3] = 1
    cleared = erase_and_add(memory, w, torch.ones(B, 1, M), torch.zeros(B, 1, M))
    assert (cleared[:, 3] == 0).all()
    torch.testing.assert_close(cleared[:, [0, 1, 2, 4, 5, 6]], memory[:, [0, 1, 2, 4, 5, 6]], rtol=0, atol=0)


def test_write_matches_numpy_for_several_heads():
    g = torch.Generator().manual_seed(3)
    memory = torch.randn(B, N, M, generator=g, dtype=torch.float64)
    w = torch.softmax(torch.randn(B, H, N, generator=g, dtype=torch.float64), -1)
    e = torch.rand(B, H, M, generator=g, dtype=torch.float64)
    a = torch.randn(B, H, M, generator=g, dtype=torch.float64)
    want = memory.numpy().copy()
    for h in range(H):
        want *= 1 - w.numpy()[:, h, :, None] * e.numpy()[:, h, None, :]
    for h in range(H):
        want += w.numpy()[:, h, :, None] * a.numpy()[:, h, None, :]
    np.testing.assert_allclose(erase_and_add(memory, w, e, a).numpy(), want, atol=1e-12)
    np.testing.assert_allclose(
        read_memory(memory, w).numpy(), np.einsum("bhn,bnm->bhm", w.numpy(), memory.numpy()), atol=1e-12
    )


def test_gradcheck_through_the_addressing_chain():
    inputs = [x.requires_grad_(True) for x in random_inputs(7)]
    assert torch.autograd.gradcheck(lambda *xs: read_memory(xs[0], address(*xs)), inputs)


def test_bad_shapes_name_the_argument():
    memory, previous, key, beta, gate, shift, gamma = random_inputs()
    with pytest.raises(ValueError, match="strength has shape"):
        content_addressing(memory, key, beta[:, :1])
    with pytest.raises(ValueError, match="shift has 4 offsets"):
        shift_weighting(previous, torch.ones(B, H, 4) / 4)
    with pytest.raises(ValueError, match="no larger than the memory's 7 locations"):
        shift_weighting(previous, torch.ones(B, H, 9, dtype=torch.float64) / 9)
    with pytest.raises(ValueError, match="erase has shape"):
        erase_and_add(memory, previous, torch.ones(B, H, M + 1), torch.ones(B, H, M))
