"""Validate once: arguments are checked at the public entry points — a model's forward /
encode / decode, a module or function a user calls — and a composite calls its parts with
``check=False``; a decoding loop checks its first step in full and passes ``check=False`` to the
later ones. No thread-local switch. Decoding runs under ``torch.inference_mode`` while every
table the model caches on the way still serves training."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

import attnlab
from attnlab.attention import core, masks, multihead
from attnlab.generation import greedy_search, sample
from attnlab.generation.state import DecodingRows
from attnlab.models import GPT, GPTConfig, Transformer, TransformerConfig
from attnlab.models import transformer as transformer_module
from attnlab.modules import blocks, stacks
from attnlab.modules.norms import LayerNorm
from attnlab.modules.rotary import RotaryEmbedding


def test_no_thread_local_switch_is_left():
    """Checks are switched by explicit arguments only: no module keeps per-thread state."""
    src = Path(attnlab.__file__).parent
    for path in src.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(b) for b in node.bases}
                assert not bases & {"threading.local", "local"}, f"{path.name}: {node.name}"


def test_a_module_checks_what_a_user_gives_it_and_trusts_its_composite():
    norm = LayerNorm(4)
    with pytest.raises(ValueError, match="width 3 but the layer expects width 4"):
        norm(torch.randn(2, 3))
    with pytest.raises(RuntimeError):  # check=False: torch's own error, not attnlab's check
        norm(torch.randn(2, 3), check=False)


def test_one_forward_checks_each_input_once(monkeypatch):
    """A padded translation batch through three decoder layers: the token ids are checked once
    each and the source mask once, not again in every stack, layer and attention call."""
    calls: Counter = Counter()
    for module in (masks, core, multihead, blocks, stacks, transformer_module):
        for name in ("check_mask", "check_ids"):
            if hasattr(module, name):
                original = getattr(module, name)

                def counted(*args, _original=original, _name=name, **kwargs):
                    calls[_name] += 1
                    return _original(*args, **kwargs)

                monkeypatch.setattr(module, name, counted)
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab_size=11, d_model=16, num_heads=2, d_ff=32,
                                          num_encoder_layers=3, num_decoder_layers=3)).eval()
    src, tgt = torch.randint(1, 11, (2, 5)), torch.randint(1, 11, (2, 4))
    src[1, 3:] = 0  # padding: the source mask reaches every attention over the source
    model(src, tgt)
    assert calls == Counter(check_ids=2, check_mask=0)  # the model's own mask: made, not checked
    calls.clear()
    memory, src_mask = model.encode(src)
    calls.clear()
    model.decode(tgt, memory, src_mask)  # a user's call: its mask checked once for 3 layers
    assert calls == Counter(check_ids=1, check_mask=1)


def test_the_first_step_is_checked_and_the_later_ones_are_not():
    seen: list[bool] = []

    class Rows(DecodingRows):
        def __init__(self, takes_check: bool) -> None:
            self.tokens, self.takes_check = torch.zeros(1, 1, dtype=torch.long), takes_check

    rows = Rows(takes_check=True)
    for _ in range(3):
        rows.run(lambda check=True: seen.append(check))
    assert seen == [True, False, False]
    plain = Rows(takes_check=False)  # a model without the keyword is called as it is
    for _ in range(2):
        plain.run(lambda: seen.append(None))
    assert seen[3:] == [None, None]


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
