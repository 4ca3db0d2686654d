"""label_smoothed_cross_entropy against PyTorch's cross_entropy and a float64 recomputation."""

import pytest
import torch
import torch.nn.functional as F

from attnlab.training.losses import label_smoothed_cross_entropy

PAD = 0


def _data(B=3, T=5, V=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, V, generator=g) * 3  # (B, T, V)
    target = torch.randint(1, V, (B, T), generator=g)  # (B, T)
    target[0, 3:] = PAD
    target[-1, 1:] = PAD
    return logits, target


def _float64_reference(logits, target, eps, pad):
    """-sum_v q_v log p_v with q = (1 - eps) onehot(y) + eps / V, over non-pad positions."""
    V = logits.shape[-1]
    total, count = torch.zeros((), dtype=torch.float64), 0
    for b in range(target.shape[0]):
        for t in range(target.shape[1]):
            y = int(target[b, t])
            if y == pad:
                continue
            logp = torch.log_softmax(logits[b, t].double(), dim=-1)  # (V,)
            q = torch.full((V,), eps / V, dtype=torch.float64)
            q[y] += 1 - eps
            total -= (q * logp).sum()
            count += 1
    return total, count


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.35])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_matches_torch_cross_entropy(eps, reduction):
    logits, target = _data()
    loss, n = label_smoothed_cross_entropy(
        logits, target, epsilon=eps, ignore_index=PAD, reduction=reduction
    )
    ref = F.cross_entropy(
        logits.reshape(-1, 7),
        target.reshape(-1),
        ignore_index=PAD,
        label_smoothing=eps,
        reduction=reduction,
    )
    torch.testing.assert_close(loss, ref, rtol=1e-6, atol=1e-6)
    assert int(n) == int((target != PAD).sum()) == 9


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_matches_float64_recomputation(eps):
    logits, target = _data(B=2, T=4, V=5, seed=3)
    loss, n = label_smoothed_cross_entropy(logits.double(), target, epsilon=eps, ignore_index=PAD)
    ref, count = _float64_reference(logits, target, eps, PAD)
    torch.testing.assert_close(loss.double(), ref, rtol=1e-12, atol=1e-12)
    assert int(n) == count


def test_gradient_matches_torch():
    logits, target = _data(seed=5)
    a = logits.clone().requires_grad_()
    b = logits.clone().requires_grad_()
    label_smoothed_cross_entropy(a, target, epsilon=0.1, ignore_index=PAD)[0].backward()
    F.cross_entropy(
        b.reshape(-1, 7), target.reshape(-1), ignore_index=PAD, label_smoothing=0.1, reduction="sum"
    ).backward()
    torch.testing.assert_close(a.grad, b.grad)
    assert torch.all(a.grad[-1, 1:] == 0)  # padded positions get no gradient


def test_two_dimensional_inputs_and_default_ignore_index():
    logits = torch.randn(6, 4)
    target = torch.tensor([0, 1, 2, 3, -100, 1])
    loss, n = label_smoothed_cross_entropy(logits, target, epsilon=0.2)
    ref = F.cross_entropy(logits, target, label_smoothing=0.2, reduction="sum")
    torch.testing.assert_close(loss, ref)
    assert int(n) == 5


def test_bf16_logits_are_reduced_in_float32():
    logits, target = _data(seed=7)
    low = logits.bfloat16()
    loss, _ = label_smoothed_cross_entropy(low, target, ignore_index=PAD)
    ref, _ = label_smoothed_cross_entropy(low.float(), target, ignore_index=PAD)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, ref)


def test_all_positions_ignored_gives_zero_not_nan():
    logits = torch.randn(2, 3, 5)
    target = torch.full((2, 3), PAD)
    for reduction in ("sum", "mean"):
        loss, n = label_smoothed_cross_entropy(
            logits, target, ignore_index=PAD, reduction=reduction
        )
        assert float(loss) == 0.0 and int(n) == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target": torch.zeros(3, 4, dtype=torch.long)}, "target has shape (3, 4)"),
        ({"target": torch.zeros(3, 5)}, "integer token ids"),
        ({"target": torch.full((3, 5), 7)}, "token ids in [0, 7)"),
        ({"epsilon": 1.0}, "epsilon must be in [0, 1), got 1.0"),
        ({"reduction": "none"}, "reduction must be one of"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, message):
    logits, target = _data()
    args = {"target": target, **kwargs}
    target = args.pop("target")
    with pytest.raises(ValueError) as err:
        label_smoothed_cross_entropy(logits, target, ignore_index=PAD, **args)
    assert message in str(err.value)
