"""Exact resume: N steps + resume + N steps gives the losses of 2N uninterrupted steps; Ctrl-C
saves and the saved run resumes exactly; trainer.pt loads with weights_only=True."""

import io
import json
from pathlib import Path

import pytest
import torch

from attnlab.training import (
    TrainConfig,
    Trainer,
    lambda_lr,
    latest_checkpoint,
    resolve_resume,
    warmup_cosine,
)
from attnlab.training.metrics import read_metrics
from attnlab.training.state import (
    TrainerState,
    check_weights_only_safe,
    load_trainer_state,
    save_trainer_state,
)
from training_toys import (  # noqa: F401 (one_thread is an autouse fixture)
    EpochShuffled,
    lm_loss,
    make_batches,
    make_model,
    noisy_lm_loss,
    one_thread,
)

N = 4  # with 5 batches per epoch and grad_accum=2 an epoch has 3 steps: N crosses an epoch


class SetEpochData:
    """A re-iterable with set_epoch (the DistributedSampler convention)."""

    def __init__(self, batches):
        self.order, self.epoch = EpochShuffled(batches, seed=3), 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        return iter(self.order(self.epoch))


def _run(run_dir, max_steps, *, resume=False, loss_fn=noisy_lm_loss, data="callable", seed=0,
         eval_fn=None, patience=None):
    # A different init seed on resume: the weights must come from the checkpoint.
    model = make_model(seed=99 if resume else 0, dropout=0.2)
    opt = torch.optim.AdamW(model.parameters(), lr=1.0, weight_decay=0.1)
    sched = lambda_lr(opt, warmup_cosine(warmup=2, total=2 * N, peak=0.05))
    batches = make_batches(5, seed=7)
    train_data = EpochShuffled(batches, seed=1) if data == "callable" else SetEpochData(batches)
    config = TrainConfig(
        max_steps=max_steps,
        grad_accum=2,
        clip_norm=0.5,
        log_every=1,
        save_every=N,
        seed=seed,
        run_dir=str(run_dir),
        progress=False,
        eval_every=3 if eval_fn else 0,
        patience=patience,
    )
    trainer = Trainer(model, opt, loss_fn, train_data, config, scheduler=sched, eval_fn=eval_fn)
    result = trainer.fit(resume_from=run_dir if resume is True else resume or None)  # or a checkpoint
    return result, model


@pytest.mark.parametrize("data", ["callable", "set_epoch"])
def test_n_steps_plus_resume_plus_n_steps_equals_2n_steps(tmp_path, data):
    full, full_model = _run(tmp_path / "full", 2 * N, data=data)
    first, _ = _run(tmp_path / "split", N, data=data)
    assert first.stopped == "max_steps" and first.last_checkpoint.name == f"step_{N:08d}"
    rest, rest_model = _run(tmp_path / "split", 2 * N, resume=True, data=data)
    assert [h["step"] for h in rest.history] == list(range(N + 1, 2 * N + 1))
    assert [h["loss"] for h in rest.history] == [h["loss"] for h in full.history[N:]]
    assert [h["lr"] for h in rest.history] == [h["lr"] for h in full.history[N:]]
    for a, b in zip(full_model.parameters(), rest_model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert rest.epoch == full.epoch == 2
    steps = [json.loads(x)["step"] for x in (tmp_path / "split" / "metrics.jsonl").open()]
    assert steps == list(range(1, 2 * N + 1))  # no duplicated events after the resume


def test_resume_needs_the_same_random_states(tmp_path):
    """Control: with another torch RNG state in trainer.pt the noisy loss diverges (while the
    lr sequence does not), so the exactness checks above can fail."""
    full, _ = _run(tmp_path / "full", 2 * N)
    _run(tmp_path / "split", N)
    path = latest_checkpoint(tmp_path / "split") / "trainer.pt"
    payload = torch.load(path, weights_only=True)
    payload["rng"][0]["torch"] = torch.Generator().manual_seed(1234).get_state()
    torch.save(payload, path)
    rest, _ = _run(tmp_path / "split", 2 * N, resume=True)
    assert [h["lr"] for h in rest.history] == [h["lr"] for h in full.history[N:]]
    assert [h["loss"] for h in rest.history] != [h["loss"] for h in full.history[N:]]


def test_ctrl_c_saves_the_last_completed_step_and_resumes_exactly(tmp_path):
    full, _ = _run(tmp_path / "full", 2 * N)
    calls = {"n": 0}

    def interrupt_in_step_4(model, batch):
        calls["n"] += 1  # steps take micro-batches 2, 2, 1 (end of epoch 0), then 2, ...
        if calls["n"] == 7:  # the 2nd micro-batch of step 4, after the 1st consumed RNG
            raise KeyboardInterrupt
        return noisy_lm_loss(model, batch)

    stopped, _ = _run(tmp_path / "split", 2 * N, loss_fn=interrupt_in_step_4)
    assert (stopped.stopped, stopped.step) == ("interrupted", 3)
    assert stopped.last_checkpoint == tmp_path / "split" / "checkpoints" / "step_00000003"
    rest, _ = _run(tmp_path / "split", 2 * N, resume=True)
    assert [h["loss"] for h in rest.history] == [h["loss"] for h in full.history[3:]]


def evaluation(interrupt_at: int | None = None):
    """An eval_fn that draws a random number (as sampling does) and, at its ``interrupt_at``-th
    call, is interrupted by Ctrl-C after the draw."""
    calls = {"n": 0}
    val = make_batches(1, seed=11)[0]

    def evaluate(model):
        calls["n"] += 1
        draw = torch.rand(()).item()
        if calls["n"] == interrupt_at:
            raise KeyboardInterrupt
        loss, tokens = lm_loss(model, val)
        return {"val_loss": float(loss) / float(tokens), "draw": draw}

    return evaluate


def events(run_dir: Path) -> list[dict]:
    """metrics.jsonl without its timing fields."""
    return [{k: v for k, v in e.items() if k not in ("tokens_per_s", "elapsed_s")}
            for e in read_metrics(run_dir)]


@pytest.mark.parametrize("stop", ["checkpoint", "finished", "interrupted_eval"])
def test_a_resumed_run_logs_exactly_the_events_of_the_uninterrupted_one(tmp_path, stop):
    """Resumed from a step checkpoint, from the end of a finished run (twice), or from the
    checkpoint Ctrl-C saved inside an evaluation (repeated on resume, with the random state of
    before it): metrics.jsonl holds the events of the uninterrupted run, each once, and the
    weights are the same. 8 steps, evaluations at 3 and 6 and a last one at 8."""
    full, full_model = _run(tmp_path / "full", 2 * N, eval_fn=evaluation())
    run = tmp_path / stop
    first = _run(run, 2 * N, eval_fn=evaluation(2 if stop == "interrupted_eval" else None))[0]
    assert first.stopped == ("interrupted" if stop == "interrupted_eval" else "max_steps")
    resume = run / "checkpoints" / f"step_{N:08d}" if stop == "checkpoint" else True
    for _ in range(2 if stop == "finished" else 1):
        rest, rest_model = _run(run, 2 * N, resume=resume, eval_fn=evaluation())
    assert events(run) == events(tmp_path / "full")
    assert [e["step"] for e in events(run) if e["event"] == "eval"] == [3, 6, 8]
    assert rest.last_eval == full.last_eval and rest.best_metric == full.best_metric
    for a, b in zip(full_model.parameters(), rest_model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_a_run_stopped_early_stays_stopped_when_resumed(tmp_path):
    def worse_each_time():
        losses = iter(range(1, 100))
        return lambda model: {"val_loss": float(next(losses))}

    first, _ = _run(tmp_path, 2 * N, eval_fn=worse_each_time(), patience=1)
    assert (first.stopped, first.step) == ("early_stopping", 6)
    logged = events(tmp_path)
    again, _ = _run(tmp_path, 2 * N, resume=True, eval_fn=worse_each_time(), patience=1)
    assert (again.stopped, again.step) == ("early_stopping", 6) and events(tmp_path) == logged


def test_trainer_pt_is_weights_only_loadable(tmp_path):
    result, _ = _run(tmp_path, N)
    payload = torch.load(result.last_checkpoint / "trainer.pt", weights_only=True)
    assert set(payload) == {"format", "state", "optimizer", "scheduler", "rng", "extra"}
    assert set(payload["rng"][0]) >= {"python", "numpy", "torch"}
    assert payload["state"]["step"] == N and payload["extra"]["config"]["grad_accum"] == 2


def test_unsafe_values_are_refused_at_save_time():
    with pytest.raises(TypeError, match=r"trainer state\['extra'\]\['path'\] is a pathlib"):
        check_weights_only_safe({"extra": {"path": Path("x")}})
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    with pytest.raises(TypeError, match="weights_only"):
        save_trainer_state(io.BytesIO(), state=TrainerState(), optimizer=opt, extra={"f": print})


def test_missing_or_corrupt_resume_sources_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="resume path .*nowhere does not exist"):
        resolve_resume(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="neither a checkpoint"):
        _run(tmp_path / "empty", 2, resume=True)
    result, _ = _run(tmp_path / "run", 2 * N)
    (result.last_checkpoint / "trainer.pt").write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match="trainer state .*trainer.pt could not be read"):
        _run(tmp_path / "run", 3 * N, resume=True)
    with pytest.raises(FileNotFoundError, match="trainer state .* does not exist"):
        load_trainer_state(tmp_path / "missing.pt")
