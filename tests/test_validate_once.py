"""Validate once (issue 19): a decoding loop checks its first step in full and runs the later
steps under :func:`attnlab.validation.trusted_inputs`; decoding runs under
``torch.inference_mode`` while every table the model caches on the way still serves training."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from attnlab.generation import greedy_search, sample
from attnlab.generation.state import DecodingRows
from attnlab.models import GPT, GPTConfig
from attnlab.modules.norms import LayerNorm
from attnlab.modules.rotary import RotaryEmbedding
from attnlab.validation import inputs_trusted, trusted_inputs


def test_trusted_inputs_is_scoped_and_restored_after_an_error():
    assert not inputs_trusted()
    with pytest.raises(RuntimeError, match="boom"), trusted_inputs():
        assert inputs_trusted()
        with trusted_inputs():
            assert inputs_trusted()
        assert inputs_trusted()  # the inner block restores the outer setting
        raise RuntimeError("boom")
    assert not inputs_trusted()


def test_a_layer_checks_its_input_outside_the_block_only():
    norm = LayerNorm(4)
    with pytest.raises(ValueError, match="width 3 but the layer expects width 4"):
        norm(torch.randn(2, 3))
    with trusted_inputs(), pytest.raises(RuntimeError):  # torch's own error, not attnlab's check
        norm(torch.randn(2, 3))


def test_trust_is_per_thread():
    errors: list[str] = []
    inside, done = threading.Event(), threading.Event()

    def other_thread() -> None:
        inside.wait()
        try:
            LayerNorm(4)(torch.randn(2, 3))
        except ValueError as e:  # still checked: the other thread's block does not reach here
            errors.append(str(e))
        done.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    with trusted_inputs():
        inside.set()
        done.wait(10)
    thread.join()
    assert len(errors) == 1 and "expects width 4" in errors[0]


def test_the_first_step_is_checked_and_the_later_ones_trusted():
    seen: list[bool] = []

    class Rows(DecodingRows):
        def __init__(self) -> None:
            self.tokens = torch.zeros(1, 1, dtype=torch.long)

    rows = Rows()
    for _ in range(3):
        rows.run(lambda: seen.append(inputs_trusted()))
    assert seen == [False, True, True]
    assert not inputs_trusted()


def tiny_gpt(positional: str, block_size: int = 64) -> GPT:
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=11, block_size=block_size, d_model=16, num_heads=2, num_layers=2,
                       positional=positional)
    return GPT(config)


@pytest.mark.parametrize("positional", ["rope", "sinusoidal", "learned", "alibi"])
def test_decoding_equals_the_uncached_forward(positional):
    model = tiny_gpt(positional).eval()
    prompt = torch.tensor([[1, 2, 3]])
    tokens = greedy_search(model, prompt=prompt, max_new_tokens=20)[0]
    ids = prompt
    with torch.no_grad():
        for _ in range(20):  # the reference: the whole sequence re-run, full checks, no cache
            ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert tokens == ids[0, 3:].tolist()


@pytest.mark.parametrize("positional", ["rope", "sinusoidal"])
def test_tables_built_while_decoding_still_train(positional):
    """RoPE's cos/sin tables and a grown sinusoid table are first made under inference_mode
    here; a later training step must still backpropagate through them."""
    model = tiny_gpt(positional, block_size=600)
    sample(model, prompt=[1, 2], max_new_tokens=560, seed=0)  # past the 512-row sinusoid table
    ids = torch.randint(0, 11, (2, 590))
    loss = model(ids).logsumexp(-1).mean()
    loss.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def numpy_angles(positions: np.ndarray, head_dim: int, base: float = 10000.0) -> np.ndarray:
    theta = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)  # (d_h/2,)
    return positions[:, None].astype(np.float64) * theta  # (n, d_h/2)


def test_rope_rotations_are_the_formula_sliced_from_one_cache():
    rope = RotaryEmbedding(8)
    x = torch.zeros(1, 1, 5, 8)
    rotation = rope.rotations(5, 3, x)  # (5, 4) complex: e^{i m θ_i}
    angles = numpy_angles(np.arange(3, 8), 8)
    np.testing.assert_allclose(rotation.real.numpy(), np.cos(angles), rtol=0, atol=1e-7)
    np.testing.assert_allclose(rotation.imag.numpy(), np.sin(angles), rtol=0, atol=1e-7)
    again = rope.rotations(2, 0, x)
    assert again.data_ptr() == rotation.data_ptr() - 3 * rotation.stride(0) * rotation.element_size()
    longer = rope.rotations(10, 200, x)  # past the table: it grows, values still the formula
    np.testing.assert_allclose(longer.real.numpy(), np.cos(numpy_angles(np.arange(200, 210), 8)),
                               rtol=0, atol=1e-6)
    assert rope.rotations(5, 3, x.bfloat16()).dtype == torch.complex64  # rotated in float32
    assert rope.rotations(5, 3, x.double()).dtype == torch.complex128
    with pytest.raises(ValueError, match="offset must be >= 0, got -1"):
        rope.rotations(2, -1, x)
