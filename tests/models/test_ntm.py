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
from attnlab.models.ntm import NTM, NTMConfig, NTMState


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


@pytest.mark.parametrize("kw", [{}, {"controller": "feedforward", "learned_memory": True, "read_heads": 2}])
def test_save_and_load_round_trip(tmp_path, kw):
    model = small_ntm(**kw).eval()
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


def test_a_feedforward_controller_carries_nothing_but_the_memory_and_the_reads():
    """Graves et al. (2014) §3.3: a feedforward controller has no state of its own. Restart the
    machine at step t from the trace's memory, weightings and reads with the controller's
    ``(h, c)`` replaced by noise: its output is the same. An LSTM's is not (the test can fail)."""
    x = priority_sort(2, 5, keep=3, generator=gen(3)).inputs
    for controller, same in (("feedforward", True), ("lstm", False)):
        model = small_ntm(input_dim=10, controller=controller, learned_memory=True, read_heads=2).eval()
        logits, trace = model(x, return_trace=True)
        t = 4
        state = NTMState(
            memory=trace.memory[:, t - 1], reads=addressing.read_memory(trace.memory[:, t - 1],
                                                                        trace.read_weights[:, t - 1]),
            read_weights=trace.read_weights[:, t - 1], write_weights=trace.write_weights[:, t - 1],
            h=torch.randn(2, 32), c=torch.randn(2, 32),
        )
        out = model.step(x[:, t], state)[0]
        assert torch.allclose(out, logits[:, t], atol=1e-5) is same, controller


def reference_forward(model: NTM, x: torch.Tensor) -> torch.Tensor:
    """The feedforward NTM's equations written out in float64 from its weights (the addressing
    is :mod:`attnlab.attention.addressing`, checked against NumPy in its own tests)."""
    c, w = model.config, {k: v.double() for k, v in model.state_dict().items()}
    batch, m, shifts = x.shape[0], c.memory_width, 2 * c.shift_range + 1
    memory = w["initial_memory"].expand(batch, -1, -1)
    reads = w["initial_reads"].expand(batch, -1, -1)
    start = torch.zeros(batch, 1, c.memory_size, dtype=torch.float64)
    start[..., 0] = 1
    read_w, write_w = start.expand(-1, c.read_heads, -1), start.expand(-1, c.write_heads, -1)

    def head(params, memory, previous):
        key, beta, gate, shift, gamma = params.split([m, 1, 1, shifts, 1], dim=-1)
        softplus = torch.nn.functional.softplus
        return addressing.address(memory, previous, key, strength=softplus(beta[..., 0]),
                                  gate=torch.sigmoid(gate[..., 0]), shift=torch.softmax(shift, -1),
                                  gamma=1 + softplus(gamma[..., 0]))

    outputs = []
    for t in range(x.shape[1]):
        seen = torch.cat([x[:, t].double(), reads.flatten(1)], -1)
        h = torch.tanh(seen @ w["controller.weight"].T + w["controller.bias"])
        write = (h @ w["write_head.weight"].T + w["write_head.bias"]).clamp(-c.clip, c.clip)
        write = write.view(batch, c.write_heads, -1)
        params, erase, add = write.split([model.address_width, m, m], -1)
        write_w = head(params, memory, write_w)
        memory = addressing.erase_and_add(memory, write_w, torch.sigmoid(erase), torch.tanh(add))
        read = (h @ w["read_head.weight"].T + w["read_head.bias"]).clamp(-c.clip, c.clip)
        read_w = head(read.view(batch, c.read_heads, -1), memory, read_w)
        reads = addressing.read_memory(memory, read_w)
        outputs.append(torch.cat([h, reads.flatten(1)], -1) @ w["output.weight"].T + w["output.bias"])
    return torch.stack(outputs, 1)


def test_the_feedforward_machine_matches_a_float64_recomputation():
    model = small_ntm(input_dim=10, controller="feedforward", learned_memory=True, read_heads=3,
                      write_heads=2).eval()
    x = priority_sort(3, 6, keep=4, generator=gen(4)).inputs
    torch.testing.assert_close(model(x).double(), reference_forward(model, x), rtol=1e-4, atol=1e-5)


def test_several_heads_trace_and_a_learned_memory_start():
    model = small_ntm(input_dim=10, controller="feedforward", learned_memory=True, read_heads=4,
                      write_heads=4)
    x = priority_sort(2, 6, keep=4, generator=gen(5)).inputs
    logits, trace = model(x, return_trace=True)
    assert trace.read_weights.shape == trace.write_weights.shape == (2, 11, 4, 16)
    assert trace.erase.shape == (2, 11, 4, 8) and trace.memory.shape == (2, 11, 16, 8)
    first = addressing.erase_and_add(model.initial_memory.expand(2, -1, -1), trace.write_weights[:, 0],
                                     trace.erase[:, 0], trace.add[:, 0])
    torch.testing.assert_close(trace.memory[:, 0], first)
    logits.sum().backward()
    assert model.initial_memory.grad.abs().sum() > 0  # the start is learned
    rows = model.initial_memory.detach()
    assert torch.linalg.matrix_rank(rows) == min(rows.shape)  # distinct rows: content can tell them apart


def test_the_default_machine_is_the_lstm_with_a_constant_memory():
    model = small_ntm()
    assert isinstance(model.controller, torch.nn.LSTMCell)
    assert not any("initial_memory" in name for name in model.state_dict())
    assert (model.initial_state(2).memory == model.config.memory_init).all()
    with pytest.raises(ValueError, match="controller must be one of lstm, feedforward, got 'gru'"):
        small_ntm(controller="gru")
