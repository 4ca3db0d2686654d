"""The training loop: accumulation, clipping, scheduling, checkpoints, NaN stop, early stopping,
metrics, bf16 and compile flags. Tiny models and synthetic batches only."""

import json
import math

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

import attnlab.checkpoint
from attnlab.training import (
    NonFiniteLossError,
    TrainConfig,
    Trainer,
    lambda_lr,
    latest_checkpoint,
    list_checkpoints,
    warmup_cosine,
)
from attnlab.training.progress import TrainingProgress, planned_steps, steps_within_budget
from training_toys import (  # noqa: F401 (one_thread is an autouse fixture)
    PAD,
    EpochShuffled,
    concat,
    lm_loss,
    make_batches,
    make_model,
    one_thread,
)

SCHEDULE = warmup_cosine(warmup=2, total=6, peak=0.05, min_lr=0.005)


def _trainer(model, data, tmp_path=None, loss_fn=lm_loss, **cfg):
    opt = torch.optim.AdamW(model.parameters(), lr=1.0, weight_decay=0.01)
    cfg.setdefault("max_epochs", 1)
    config = TrainConfig(progress=False, run_dir=str(tmp_path) if tmp_path else None, **cfg)
    return Trainer(model, opt, loss_fn, data, config, scheduler=lambda_lr(opt, SCHEDULE))


def _reference_big_batch_training(model, big_batches, clip):
    """Plain PyTorch: mean label-smoothed loss of each big batch, clip, AdamW, schedule."""
    opt = torch.optim.AdamW(model.parameters(), lr=1.0, weight_decay=0.01)
    sched = lambda_lr(opt, SCHEDULE)
    for batch in big_batches:
        opt.zero_grad()
        logits = model(batch["x"])  # (B, T, V)
        loss = F.cross_entropy(
            logits.flatten(0, 1),
            batch["y"].flatten(),
            ignore_index=PAD,
            label_smoothing=0.1,
            reduction="sum",
        )
        (loss / (batch["y"] != PAD).sum()).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()


def test_accumulating_4_micro_batches_equals_one_batch_of_4b_in_float64():
    micro = make_batches(12, batch_size=2, seed=1)  # 3 steps of 4 micro-batches
    big = [concat(micro[i : i + 4]) for i in range(0, 12, 4)]
    accumulated = make_model(dtype=torch.float64)
    result = _trainer(accumulated, micro, grad_accum=4, clip_norm=0.3).fit()
    one_batch = make_model(dtype=torch.float64)
    _trainer(one_batch, big, grad_accum=1, clip_norm=0.3).fit()
    reference = make_model(dtype=torch.float64)
    _reference_big_batch_training(reference, big, clip=0.3)
    for a, b, r in zip(
        accumulated.parameters(), one_batch.parameters(), reference.parameters(), strict=True
    ):
        torch.testing.assert_close(a, r, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(b, r, rtol=1e-12, atol=1e-12)
    assert result.step == 3 and result.stopped == "max_epochs"
    assert all(h["grad_norm"] > 0.3 for h in result.history)  # clipping was active


def test_scheduler_steps_once_per_optimizer_step_and_loss_is_per_token():
    model = make_model()
    data = make_batches(8)
    trainer = _trainer(model, data, grad_accum=2)
    result = trainer.fit()
    assert trainer.scheduler.last_epoch == 4
    assert [h["lr"] for h in result.history] == pytest.approx([SCHEDULE(s) for s in range(4)])
    tokens = [int((b["y"] != PAD).sum()) for b in data]
    assert [h["tokens"] for h in result.history] == [
        tokens[i] + tokens[i + 1] for i in (0, 2, 4, 6)
    ]
    assert all(0 < h["loss"] < 2 * math.log(13) for h in result.history)


def test_checkpoints_have_the_design_format_and_are_pruned(tmp_path):
    model = make_model()
    trainer = _trainer(model, make_batches(6), tmp_path, save_every=2, keep_last_k=2)
    trainer.files = {"tokenizer.json": b'{"toy": true}'}
    result = trainer.fit()
    found = list_checkpoints(tmp_path)
    assert [p.name for p in found] == ["step_00000004", "step_00000006"]
    assert result.last_checkpoint == found[-1]
    last = found[-1]
    assert sorted(p.name for p in last.iterdir()) == [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "trainer.pt",
    ]
    assert json.loads((last / "config.json").read_text())["model_type"] == "toy_lm"
    payload = torch.load(last / "trainer.pt", weights_only=True)
    assert payload["state"]["step"] == 6 and payload["scheduler"]["last_epoch"] == 6
    weights = load_file(last / "model.safetensors")
    for name, p in model.state_dict().items():
        torch.testing.assert_close(weights[name], p, rtol=0, atol=0)


def test_nan_loss_stops_with_a_message_and_keeps_the_last_good_checkpoint(tmp_path):
    calls = {"n": 0}

    def loss_fn(model, batch):
        calls["n"] += 1
        loss, n = lm_loss(model, batch)
        return (loss * float("nan") if calls["n"] == 5 else loss), n

    model = make_model()
    trainer = _trainer(model, make_batches(10), tmp_path, loss_fn=loss_fn, save_every=2)
    with pytest.raises(NonFiniteLossError) as err:
        trainer.fit()
    message = str(err.value)
    assert "loss became nan at step 5" in message and "step_00000004" in message
    assert latest_checkpoint(tmp_path).name == "step_00000004"
    weights = load_file(latest_checkpoint(tmp_path) / "model.safetensors")
    for name, p in model.state_dict().items():  # the bad step did not update the weights
        torch.testing.assert_close(weights[name], p, rtol=0, atol=0)


def test_early_stopping_with_patience_and_best_checkpoint(tmp_path):
    values = iter([5.0, 4.0, 4.5, 4.2, 3.0, 2.0])
    trainer = _trainer(make_model(), make_batches(10), tmp_path, eval_every=1, patience=2)
    trainer.eval_fn = lambda model: {"val_loss": next(values)}
    result = trainer.fit()
    assert (result.stopped, result.step, result.best_metric) == ("early_stopping", 4, 4.0)
    best = torch.load(tmp_path / "best" / "trainer.pt", weights_only=True)
    assert best["state"]["step"] == 2
    evals = [
        e
        for e in map(json.loads, (tmp_path / "metrics.jsonl").read_text().splitlines())
        if e["event"] == "eval"
    ]
    assert [e["val_loss"] for e in evals] == [5.0, 4.0, 4.5, 4.2]


def test_a_best_checkpoint_at_the_last_step_still_gets_a_step_checkpoint(tmp_path):
    values = iter([3.0, 2.0])
    trainer = _trainer(make_model(), make_batches(4), tmp_path, eval_every=2)
    trainer.eval_fn = lambda model: {"val_loss": next(values)}
    result = trainer.fit()
    assert result.best_metric == 2.0 and result.last_checkpoint.name == "step_00000004"
    assert latest_checkpoint(tmp_path) == result.last_checkpoint
    best = torch.load(tmp_path / "best" / "trainer.pt", weights_only=True)
    assert best["state"]["step"] == 4


def test_eval_fn_without_the_metric_is_an_error_when_early_stopping():
    trainer = _trainer(make_model(), make_batches(4), eval_every=1, patience=2)
    trainer.eval_fn = lambda model: {"bleu": 1.0}
    with pytest.raises(ValueError, match="eval_fn must return the metric 'val_loss'"):
        trainer.fit()


def test_metrics_jsonl_and_progress_bar(tmp_path, capsys):
    trainer = _trainer(make_model(), make_batches(6), tmp_path, log_every=2, eval_every=3)
    trainer.config.progress = True
    trainer.eval_fn = lambda model: {"val_loss": 1.5, "bleu": 2.0}
    result = trainer.fit()
    events = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train = [e for e in events if e["event"] == "train"]
    assert [e["step"] for e in train] == [2, 4, 6]
    assert [e["loss"] for e in train] == [result.history[i]["loss"] for i in (1, 3, 5)]
    assert all(e["tokens_per_s"] > 0 and "lr" in e and "elapsed_s" in e for e in train)
    assert [(e["step"], e["bleu"]) for e in events if e["event"] == "eval"] == [(3, 2.0), (6, 2.0)]
    err = capsys.readouterr().err
    assert "loss=" in err and "tok_s=" in err and "6/6" in err


def test_bf16_flag_runs_the_loss_under_cpu_autocast():
    seen = []

    def loss_fn(model, batch):
        seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
        return lm_loss(model, batch)

    result = _trainer(make_model(), make_batches(3), loss_fn=loss_fn, bf16=True).fit()
    assert seen == [(True, torch.bfloat16)] * 3
    assert all(math.isfinite(h["loss"]) for h in result.history)


def test_compile_flag_compiles_the_forward_model_and_saves_plain_weights(tmp_path, monkeypatch):
    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda m: real_compile(m, backend="eager"))
    kinds = []

    def loss_fn(model, batch):
        kinds.append(type(model).__name__)
        return lm_loss(model, batch)

    compiled = _trainer(make_model(), make_batches(3), tmp_path, loss_fn=loss_fn, compile=True)
    result = compiled.fit()
    plain = _trainer(make_model(), make_batches(3)).fit()
    assert kinds == ["OptimizedModule"] * 3
    assert [h["loss"] for h in result.history] == pytest.approx([h["loss"] for h in plain.history])
    assert not any(
        "_orig_mod" in k for k in load_file(result.last_checkpoint / "model.safetensors")
    )


def test_callable_and_infinite_data_with_max_steps():
    def windows(epoch):
        g = torch.Generator().manual_seed(epoch)
        while True:
            yield make_batches(1, seed=int(torch.randint(0, 10**6, (), generator=g)))[0]

    result = _trainer(make_model(), windows, max_epochs=None, max_steps=5).fit()
    assert (result.step, result.epoch, result.stopped) == (5, 0, "max_steps")
    result = _trainer(make_model(), EpochShuffled(make_batches(3)), max_epochs=3).fit()
    assert (result.step, result.epoch, result.stopped) == (9, 3, "max_epochs")


class EpochBatchSampler:
    """Index batches of 2, shuffled by epoch (set_epoch), for a DataLoader."""

    def __init__(self, n):
        self.n, self.epoch, self.epochs_seen = n, 0, []

    def set_epoch(self, epoch):
        self.epoch = epoch
        self.epochs_seen.append(epoch)

    def __len__(self):
        return self.n // 2

    def __iter__(self):
        order = torch.randperm(self.n, generator=torch.Generator().manual_seed(self.epoch))
        return iter(order.view(-1, 2).tolist())


def test_dataloader_batch_sampler_gets_set_epoch():
    examples = [{"x": b["x"][0], "y": b["y"][0]} for b in make_batches(6, batch_size=1)]
    sampler = EpochBatchSampler(6)
    loader = torch.utils.data.DataLoader(examples, batch_sampler=sampler)
    trainer = _trainer(make_model(), loader, max_epochs=2)
    assert planned_steps(trainer.config, loader) == 6
    result = trainer.fit()
    assert sampler.epochs_seen == [0, 1] and result.step == 6


def test_empty_epoch_and_bad_config_are_errors():
    with pytest.raises(ValueError, match="train_data produced no batches for epoch 0"):
        _trainer(make_model(), []).fit()
    with pytest.raises(ValueError, match="max_steps or max_epochs must be set"):
        TrainConfig()
    with pytest.raises(ValueError, match="grad_accum must be >= 1 \\(or None\\), got 0"):
        TrainConfig(max_steps=1, grad_accum=0)
    with pytest.raises(ValueError, match="metric_mode must be 'min' or 'max', got 'up'"):
        TrainConfig(max_steps=1, metric_mode="up")


def test_a_failed_checkpoint_write_leaves_the_previous_checkpoint_intact(tmp_path, monkeypatch):
    real_write_extra = attnlab.checkpoint.write_extra
    calls = {"n": 0}

    def crash_on_second_save(directory, extra):
        calls["n"] += 1
        if calls["n"] == 2:  # weights and config already written into the temp dir
            raise OSError("disk full")
        real_write_extra(directory, extra)

    monkeypatch.setattr(attnlab.checkpoint, "write_extra", crash_on_second_save)
    trainer = _trainer(make_model(), make_batches(6), tmp_path, save_every=2)
    with pytest.raises(OSError, match="disk full"):
        trainer.fit()
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step_00000002"]
    assert latest_checkpoint(tmp_path).name == "step_00000002"
    assert (
        torch.load(latest_checkpoint(tmp_path) / "trainer.pt", weights_only=True)["state"]["step"]
        == 2
    )


def test_fresh_run_refuses_a_run_dir_holding_an_earlier_runs_checkpoints(tmp_path):
    data = make_batches(4, batch_size=2, seed=3)
    _trainer(make_model(), data, tmp_path, save_every=2).fit()
    assert list_checkpoints(tmp_path)
    with pytest.raises(ValueError, match=r"is not empty \(checkpoints/.*resume it with --resume"):
        _trainer(make_model(), data, tmp_path, save_every=2).fit()


def test_time_budget_bounds_the_progress_bar_total():
    # 50 steps in 25 s = 2 steps/s; 75 s of a 100 s budget left -> 150 more steps
    assert steps_within_budget(50, 50, 25.0, 100.0) == 200
    assert steps_within_budget(50, 50, 120.0, 100.0) == 50  # over budget: no more steps
    assert steps_within_budget(0, 0, 0.0, 100.0) is None  # no pace yet
    progress = TrainingProgress(10**6, 0, enabled=False)
    progress.bound_by_time(50, 50, 25.0, 100.0)
    assert progress.bar.total == 200
    progress.bound_by_time(50, 50, 0.001, 100.0)  # the budget would allow ~5e6: more than planned
    assert progress.bar.total == 10**6
    progress.close()


def test_planned_steps_is_max_steps_or_the_epochs_steps():
    config = TrainConfig(max_steps=100, max_epochs=3, grad_accum=2)
    assert planned_steps(config, list(range(10))) == 15  # ceil(10 / 2) * 3
    assert planned_steps(TrainConfig(max_steps=7, max_epochs=3), list(range(10))) == 7
    assert planned_steps(TrainConfig(max_epochs=3), lambda epoch: iter(())) is None
    assert planned_steps(TrainConfig(max_steps=9), lambda epoch: iter(())) == 9


def test_the_wall_time_safety_net_warns_when_it_fires(capsys):
    """Recipes are bounded by steps; max_time_s only stops a run that would not finish, and says
    so, since the result then depends on the machine's speed."""
    model = make_model()
    config = TrainConfig(max_steps=10_000, max_time_s=1e-6, progress=False, log_every=0)
    result = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), lm_loss, make_batches(4),
                     config).fit()
    assert result.stopped == "max_time" and result.step < 10_000
    err = capsys.readouterr().err
    assert "train.max_time_s=1e-06 stopped training at step" in err and "machine's speed" in err
