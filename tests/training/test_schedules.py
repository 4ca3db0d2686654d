"""Learning-rate schedules against their formulas, through a real optimizer and LambdaLR."""

import io
import math

import pytest
import torch

from attnlab.training.schedules import constant, lambda_lr, noam, warmup_cosine


def _lrs_seen_by_updates(schedule, n_updates, groups=1):
    """The lr each optimizer update actually used, per group."""
    params = [torch.nn.Parameter(torch.zeros(1)) for _ in range(groups)]
    opt = torch.optim.SGD([{"params": [p]} for p in params], lr=0.5)
    sched = lambda_lr(opt, schedule)
    seen = []
    for _ in range(n_updates):
        seen.append([g["lr"] for g in opt.param_groups])
        opt.step()
        sched.step()
    return seen


def test_noam_is_equation_3_of_the_paper():
    d, warmup, scale = 512, 40, 2.0
    seen = _lrs_seen_by_updates(noam(d, warmup, scale), 120)
    for i, (lr,) in enumerate(seen):
        step_num = i + 1  # the paper counts updates from 1
        expected = scale * d**-0.5 * min(step_num**-0.5, step_num * warmup**-1.5)
        assert lr == pytest.approx(expected, rel=1e-12)
    lrs = [lr for (lr,) in seen]
    assert max(lrs) == lrs[warmup - 1]  # the peak is at step_num = warmup
    assert lrs[warmup - 1] == pytest.approx(scale * (d * warmup) ** -0.5, rel=1e-12)


def test_warmup_cosine_formula_and_landmarks():
    warmup, total, peak, min_lr = 10, 50, 3e-3, 3e-4
    schedule = warmup_cosine(warmup, total, peak, min_lr)
    seen = [lr for (lr,) in _lrs_seen_by_updates(schedule, 70)]
    for step, lr in enumerate(seen):
        if step < warmup:
            expected = peak * (step + 1) / warmup
        elif step <= total:
            expected = min_lr + 0.5 * (
                1 + math.cos(math.pi * (step - warmup) / (total - warmup))
            ) * (peak - min_lr)
        else:
            expected = min_lr
        assert lr == pytest.approx(expected, rel=1e-12)
    assert seen[warmup - 1] == pytest.approx(peak) and seen[warmup] == pytest.approx(peak)
    assert seen[(warmup + total) // 2] == pytest.approx((peak + min_lr) / 2)
    assert seen[total] == pytest.approx(min_lr) and seen[-1] == pytest.approx(min_lr)
    decay = seen[warmup : total + 1]
    assert all(a >= b for a, b in zip(decay, decay[1:], strict=False))


def test_constant_with_and_without_warmup():
    assert [lr for (lr,) in _lrs_seen_by_updates(constant(0.01), 3)] == pytest.approx([0.01] * 3)
    warm = [lr for (lr,) in _lrs_seen_by_updates(constant(0.01, warmup=4), 6)]
    assert warm == pytest.approx([0.0025, 0.005, 0.0075, 0.01, 0.01, 0.01])


def test_every_parameter_group_gets_the_schedule_even_with_different_initial_lrs():
    p, q = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([{"params": [p], "lr": 1.0}, {"params": [q], "lr": 0.1}])
    sched = lambda_lr(opt, warmup_cosine(2, 5, 0.02))
    for step in range(6):
        want = warmup_cosine(2, 5, 0.02)(step)
        assert [g["lr"] for g in opt.param_groups] == pytest.approx([want, want], rel=1e-12)
        opt.step()
        sched.step()


def test_scheduler_state_is_weights_only_and_resumes_the_sequence():
    schedule = noam(64, 5)
    full = [lr for (lr,) in _lrs_seen_by_updates(schedule, 12)]
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([p], lr=1.0)
    sched = lambda_lr(opt, schedule)
    for _ in range(7):
        opt.step()
        sched.step()
    buffer = io.BytesIO()
    torch.save({"opt": opt.state_dict(), "sched": sched.state_dict()}, buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=True)
    opt2 = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched2 = lambda_lr(opt2, schedule)
    opt2.load_state_dict(saved["opt"])
    sched2.load_state_dict(saved["sched"])
    rest = []
    for _ in range(5):
        rest.append(opt2.param_groups[0]["lr"])
        opt2.step()
        sched2.step()
    assert rest == pytest.approx(full[7:], rel=1e-12)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: noam(0, 10), "d_model must be > 0, got 0"),
        (lambda: noam(16, 0), "warmup must be > 0, got 0"),
        (lambda: warmup_cosine(10, 10, 1e-3), "total must be > warmup=10, got 10"),
        (lambda: warmup_cosine(1, 10, 1e-3, min_lr=1e-2), "min_lr must be <= peak"),
        (lambda: constant(-1.0), "lr must be > 0, got -1.0"),
    ],
)
def test_bad_arguments(make, message):
    with pytest.raises(ValueError) as err:
        make()
    assert message in str(err.value)
