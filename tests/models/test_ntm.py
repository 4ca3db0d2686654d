"""The Neural Turing Machine model and its tasks' generators (Graves et al. 2014)."""

import pytest
import torch
import torch.nn.functional as F

import attnlab.attention.addressing as addressing
import attnlab.attention.scoring as scoring
from attnlab.data.algorithmic import (
    associative_recall,
    copy_sequence,
    priority_sort,
    repeat_copy,
    task_dims,
)
from attnlab.models import load_pretrained
from attnlab.models.ntm import NTM, NTMConfig


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_copy_format():
    ep = copy_sequence(3, 4, bits=8, generator=gen())
    assert ep.inputs.shape == (3, 9, 9) and ep.targets.shape == (3, 9, 8) and ep.mask.shape == (3, 9)
    assert (ep.inputs[:, 4, 8] == 1).all() and ep.inputs[:, 5:].abs().sum() == 0  # delimiter, then blanks
    torch.testing.assert_close(ep.targets[:, 5:], ep.inputs[:, :4, :8])
    assert ep.mask[:, 5:].all() and not ep.mask[:, :5].any()
    assert task_dims("copy", 8) == (9, 8)


def test_repeat_copy_format():
    ep = repeat_copy(2, 3, 4, bits=8, max_repeats=10, generator=gen())
    assert ep.inputs.shape == (2, 3 + 1 + 12 + 1, 10) and ep.targets.shape[-1] == 9
    assert torch.allclose(ep.inputs[:, 3, 9], torch.tensor(0.4))
    torch.testing.assert_close(ep.targets[:, 4:16, :8], ep.inputs[:, :3, :8].repeat(1, 4, 1))
    assert (ep.targets[:, -1, 8] == 1).all() and ep.targets[:, :-1, 8].sum() == 0
    assert task_dims("repeat_copy", 8) == (10, 9)


def test_associative_recall_answer_is_the_item_after_the_query():
    items, length, bits = 5, 3, 6
    ep = associative_recall(8, items, item_length=length, bits=bits, generator=gen(1))
    listed = items * (length + 1)
    for b in range(8):
        stored = [ep.inputs[b, i * 4 + 1:i * 4 + 4, :bits] for i in range(items)]
        query = ep.inputs[b, listed + 1:listed + 1 + length, :bits]
        index = next(i for i, item in enumerate(stored) if torch.equal(item, query))
        torch.testing.assert_close(ep.targets[b, -length:], stored[index + 1])
    assert ep.mask.sum(1).eq(length).all()
    with pytest.raises(ValueError, match="items must be at least 2"):
        associative_recall(1, 1, generator=gen())


def test_priority_sort_outputs_the_highest_priorities_in_order():
    ep = priority_sort(4, 6, keep=4, bits=8, generator=gen(2))
    for b in range(4):
        priority = ep.inputs[b, :6, 8]
        order = priority.argsort(descending=True)[:4]
        torch.testing.assert_close(ep.targets[b, 7:], ep.inputs[b, order, :8])
    with pytest.raises(ValueError, match="keep must be at most length"):
        priority_sort(1, 3, keep=4, generator=gen())


def test_generators_are_seeded():
    a, b = copy_sequence(2, 5, generator=gen(9)), copy_sequence(2, 5, generator=gen(9))
    assert torch.equal(a.inputs, b.inputs)


def small_ntm(**kw):
    torch.manual_seed(0)
    config = dict(input_dim=9, output_dim=8, controller_dim=32, memory_size=16, memory_width=8)
    return NTM(NTMConfig(**{**config, **kw}))


def test_forward_shapes_and_trace():
    model = small_ntm(read_heads=2, write_heads=3)
    x = copy_sequence(2, 4, generator=gen()).inputs
    logits, trace = model(x, return_trace=True)
    assert logits.shape == (2, 9, 8)
    assert trace.read_weights.shape == (2, 9, 2, 16) and trace.write_weights.shape == (2, 9, 3, 16)
    assert trace.erase.shape == trace.add.shape == (2, 9, 3, 8) and trace.memory.shape == (2, 9, 16, 8)
    for w in (trace.read_weights, trace.write_weights):
        assert (w >= 0).all()
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
    torch.testing.assert_close(model(x), logits)


def test_outputs_are_causal_and_batch_independent():
    model = small_ntm().eval()
    x = copy_sequence(3, 5, generator=gen()).inputs
    changed = x.clone()
    changed[:, 7] = 1 - changed[:, 7]
    torch.testing.assert_close(model(changed)[:, :7], model(x)[:, :7])
    torch.testing.assert_close(model(x[1:2]), model(x)[1:2], rtol=1e-5, atol=1e-6)


def test_the_machine_checks_its_input_once_and_not_its_own_tensors_every_step(monkeypatch):
    """Checks at the entry point only: ``forward`` checks ``x``; the addressing, reads and
    writes it calls every step get tensors it made itself and skip their shape checks."""
    calls = []
    checks = ((addressing, "check_rank"), (addressing, "_check_heads"), (scoring, "check_query_key"))
    for module, name in checks:
        check = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, check=check, **k: calls.append(a[0]) or check(*a, **k))
    model = small_ntm(read_heads=2, write_heads=2)
    model(copy_sequence(2, 4, generator=gen()).inputs)
    assert calls == []
    addressing.read_memory(torch.zeros(2, 16, 8), torch.zeros(2, 2, 16))  # a user's call is checked
    assert calls == ["memory", "weights"]


def test_save_and_load_round_trip(tmp_path):
    model = small_ntm().eval()
    model.save_pretrained(tmp_path / "ntm")
    loaded = load_pretrained(tmp_path / "ntm")
    x = copy_sequence(2, 3, generator=gen()).inputs
    assert isinstance(loaded, NTM)
    torch.testing.assert_close(loaded(x), model(x))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(memory_size=0), "memory_size"),
        (dict(memory_size=-4), "memory_size"),
        (dict(memory_size=2, shift_range=1), "shift_range 1 allows 3 shifts but memory_size is 2"),
        (dict(read_heads=0), "read_heads"),
    ],
)
def test_bad_configs_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        small_ntm(**kwargs)


def test_bad_inputs_name_the_argument():
    model = small_ntm()
    with pytest.raises(ValueError, match="x has input width 7 .* input_dim is 9"):
        model(torch.zeros(1, 4, 7))
    with pytest.raises(ValueError, match="zero-length sequence"):
        model(torch.zeros(1, 0, 9))
    with pytest.raises(ValueError, match="x must have 3 dimensions"):
        model(torch.zeros(4, 9))


def test_a_tiny_copy_task_is_learned_in_seconds():
    """Trained on lengths 1-5 with a 16 x 8 memory, the NTM copies lengths 3-5 with at most 0.1
    bit errors per sequence (measured: below 0.05 after 1,200 steps for seeds 0, 1 and 2)."""
    model = small_ntm(controller_dim=64)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = gen(0)
    for step in range(1, 1201):
        ep = copy_sequence(16, 1 + step % 5, generator=g)
        logits = model(ep.inputs)
        loss = F.binary_cross_entropy_with_logits(logits[ep.mask], ep.targets[ep.mask])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optimizer.step()
    model.eval()
    with torch.no_grad():
        for length in (3, 4, 5):
            ep = copy_sequence(100, length, generator=gen(100 + length))
            errors = ((model(ep.inputs) > 0).float() != ep.targets)[ep.mask].sum() / 100
            assert errors <= 0.1, f"length {length}: {errors:.2f} bit errors per sequence"
