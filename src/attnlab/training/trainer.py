"""A model-agnostic training loop: accumulation, clipping, bf16, compile, DDP, exact resume.

One optimizer step (Vaswani et al. 2017, §5.3; the recipe of every later Transformer):

    for each of grad_accum micro-batches:   loss_sum, n = loss_fn(model, batch); backward
    grads /= total target tokens of the step (summed over micro-batches and ranks)
    clip the global grad norm; optimizer.step(); scheduler.step()   # once per step

Normalising by the *total* token count makes 4 micro-batches of b exactly one batch of 4b,
and N ranks under ``torchrun`` exactly one process on the global batch (DDP averages
gradients over ranks; the trainer rescales by ``world_size / total_tokens``).

Data order is a function of the epoch (``train_data(epoch)`` or ``train_data.set_epoch``),
so a resumed run rebuilds the epoch and skips the micro-batches already consumed; with the
optimizer, scheduler and RNG states from ``trainer.pt`` it continues exactly.
"""

from __future__ import annotations

import io
import itertools
import math
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from attnlab.checkpoint import (
    ExtraFiles,
    SaveFn,
    checkpoint_path,
    default_save_fn,
    load_model_weights,
    prune_checkpoints,
    resolve_resume,
    write_checkpoint,
)
from attnlab.devices import autocast, model_device, to_device
from attnlab.signals import signal_of, terminate_as_interrupt
from attnlab.training import distributed as dist
from attnlab.training.config import NonFiniteLossError, TrainConfig, TrainResult
from attnlab.training.metrics import MetricsLog
from attnlab.training.progress import TrainingProgress, planned_steps
from attnlab.training.run_dir import check_steps_left, writing_run
from attnlab.training.state import (
    TrainerState,
    restore_trainer_state,
    rng_state,
    save_trainer_state,
    seed_everything,
)
from attnlab.training.step_memory import StepMemory

LossFn = Callable[[nn.Module, Any], tuple[Tensor, "Tensor | int"]]
EvalFn = Callable[[nn.Module], Mapping[str, float]]

__all__ = ["NonFiniteLossError", "TrainConfig", "TrainResult", "Trainer"]


class Trainer:
    """Train ``model`` with ``optimizer`` (and ``scheduler``, stepped per optimizer step).

    Args:
        loss_fn: ``loss_fn(model, batch) -> (loss_sum, num_tokens)``; the loss **summed**
            over the batch's target tokens (e.g.
            :func:`~attnlab.training.losses.label_smoothed_cross_entropy` with
            ``reduction="sum"``). It receives the wrapped model (compiled / DDP) and the
            batch already on the model's device (:func:`attnlab.devices.to_device`).
        train_data: the micro-batches of one epoch, as ``train_data(epoch) -> iterable`` or a
            re-iterable such as a DataLoader (``set_epoch(epoch)`` of the data, or of its
            ``batch_sampler`` / ``sampler``, is called first when present). The
            order must depend only on the epoch (seeded), and under torchrun each rank
            yields its own shard with the same number of batches. May be infinite (LM
            windows) when ``max_steps`` is set.
        eval_fn: ``eval_fn(model) -> {"val_loss": ..., "bleu": ...}``, called on every rank
            in eval mode under ``torch.no_grad()``; rank 0's result is used.
        files: extra files for every checkpoint (``{"tokenizer.json": path_or_bytes}``).
        save_fn: ``save_fn(model, directory, extra)`` writes the model part atomically;
            default :func:`attnlab.checkpoint.save_pretrained`.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        loss_fn: LossFn,
        train_data: Iterable | Callable[[int], Iterable],
        config: TrainConfig,
        *,
        scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
        eval_fn: EvalFn | None = None,
        files: ExtraFiles | None = None,
        save_fn: SaveFn = default_save_fn,
    ):
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.loss_fn, self.train_data, self.eval_fn = loss_fn, train_data, eval_fn
        self.config, self.files, self.save_fn = config, dict(files or {}), save_fn
        self.state = TrainerState()
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.is_main = self.rank == 0
        self.run_dir = Path(config.run_dir) if config.run_dir else None
        self.metrics = MetricsLog(self.run_dir) if self.run_dir and self.is_main else None
        self.device = model_device(model)
        self.forward_model = self._wrap(model)
        self._rng_to_save: dict[str, Any] | None = None  # for a Ctrl-C checkpoint mid-step or mid-eval
        self._last_checkpoint: Path | None = None
        self._history: list[dict[str, float]] = []
        on_cpu = self.device.type == "cpu"
        self._memory = StepMemory(optimizer, enabled=bool(config.measure_memory) and on_cpu)

    def _wrap(self, model: nn.Module) -> nn.Module:
        wrapped = torch.compile(model) if self.config.compile else model
        if dist.is_distributed() and not isinstance(model, DistributedDataParallel):
            ids = [self.device.index] if self.device.type == "cuda" else None
            wrapped = DistributedDataParallel(wrapped, device_ids=ids)
        return wrapped

    # ----------------------------------------------------------------- the loop
    def fit(self, resume_from: str | Path | None = None, *, overwrite: bool = False) -> TrainResult:
        """Train until ``max_steps`` / ``max_epochs`` / early stopping / ``max_time_s``.

        ``resume_from`` is a checkpoint directory or a run directory (its newest checkpoint)
        of this run. The run directory is locked for the fit, and a new run refuses one that
        is not empty unless ``overwrite`` (:mod:`attnlab.training.run_dir`).
        Ctrl-C or SIGTERM saves a checkpoint of the last completed step and returns with
        ``stopped="interrupted"`` and the ``signal``; a NaN/inf loss raises
        :class:`NonFiniteLossError` without writing a checkpoint."""
        run = writing_run(self.run_dir, resume=resume_from, overwrite=overwrite, writer=self.is_main)
        with run, terminate_as_interrupt():
            return self._fit(resume_from)

    def _fit(self, resume_from: str | Path | None) -> TrainResult:
        cfg = self.config
        if resume_from is not None:
            self._resume(resolve_resume(resume_from))
        else:
            seed_everything(cfg.seed + self.rank)
            if self.metrics is not None:
                self.metrics.reset()
        self.model.train()
        self._start_step, self._saved = self.state.step, self._progress_mark()
        self._start = time.perf_counter()
        self._progress = TrainingProgress(
            planned_steps(cfg, self.train_data), self.state.step, enabled=self.is_main and cfg.progress
        )
        signum = None
        try:
            stopped = self._run_epochs()
        except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM (signals.Terminated)
            stopped, signum = "interrupted", signal_of(interrupt)
            self._save_interrupted()
        finally:
            self._progress.close()
        if stopped.startswith("max_") and self.eval_fn is not None and not self._evaluated():
            self._evaluate()  # max_steps, max_epochs, max_time: the last step is evaluated, once
        if stopped != "interrupted" and self._saved != self._progress_mark():
            self._save()  # the last checkpoint holds the state after its evaluation
        if stopped == "max_time" and self.is_main:  # a safety net: the result now depends on speed
            print(f"warning: train.max_time_s={cfg.max_time_s} stopped training at step {self.state.step}"
                  f" before max_steps={cfg.max_steps}: this result depends on the machine's speed",
                  file=sys.stderr, flush=True)
        return TrainResult(
            self.state.step, self.state.epoch, stopped, self.state.best_metric, self._last_checkpoint,
            self.state.last_eval, self._history, time.perf_counter() - self._start, signum, self._memory.peak,
        )

    def _run_epochs(self) -> str:
        cfg = self.config
        self._window = (time.perf_counter(), self.state.tokens_seen)
        if self.state.step > 0 and (stop := self._after_step(resumed=True)) is not None:
            return stop  # resumed from a finished run (or one stopped early)
        while cfg.max_epochs is None or self.state.epoch < cfg.max_epochs:
            skip, steps = self.state.batch_in_epoch, 0
            batches = itertools.islice(iter(self._epoch_data(self.state.epoch)), skip, None)
            while micro := list(itertools.islice(batches, cfg.grad_accum)):
                self._rng_to_save = rng_state()
                self._memory.run(lambda: self._step(micro), micro)
                self._rng_to_save = None
                steps += 1
                self._progress.advance()
                if (stop := self._after_step()) is not None:
                    return stop
            if steps == 0 and skip == 0:
                raise ValueError(f"train_data produced no batches for epoch {self.state.epoch}")
            self.state.epoch += 1
            self.state.batch_in_epoch = 0
        return "max_epochs"

    def _epoch_data(self, epoch: int) -> Iterable:
        data = self.train_data
        if callable(data) and not hasattr(data, "__iter__"):
            return data(epoch)
        # The data itself, or a DataLoader's (batch) sampler, may reorder per epoch.
        for obj in (data, getattr(data, "batch_sampler", None), getattr(data, "sampler", None)):
            if hasattr(obj, "set_epoch"):
                obj.set_epoch(epoch)
        return data

    def _step(self, micro: list) -> None:
        """One optimizer step over the micro-batches ``micro``."""
        model, ddp = self.forward_model, isinstance(self.forward_model, DistributedDataParallel)
        self.optimizer.zero_grad(set_to_none=True)
        totals = torch.zeros(2, dtype=torch.float64, device=self.device)  # (loss_sum, tokens)
        for i, batch in enumerate(micro):
            sync = not ddp or i == len(micro) - 1
            with nullcontext() if sync else model.no_sync():
                with autocast(self.device, self.config.bf16):
                    loss_sum, num_tokens = self.loss_fn(model, to_device(batch, self.device))
                loss_sum.backward()
            totals[0] += loss_sum.detach().double()
            totals[1] += num_tokens
        loss_total, tokens = dist.all_reduce_sum(totals).tolist()
        step = self.state.step + 1
        if not math.isfinite(loss_total):
            self._fail(f"loss became {loss_total} at step {step} (epoch {self.state.epoch})")
        if tokens <= 0:
            raise ValueError(f"loss_fn counted no target tokens in the micro-batches of step {step}")
        scale = self.world_size / tokens  # DDP averaged over ranks; we want sum / tokens
        params = [p for g in self.optimizer.param_groups for p in g["params"] if p.grad is not None]
        torch._foreach_mul_([p.grad for p in params], scale)  # one kernel launch, not one per tensor
        grad_norm = None
        if self.config.clip_norm is not None:
            grad_norm = float(nn.utils.clip_grad_norm_(params, self.config.clip_norm))
            if not math.isfinite(grad_norm):
                self._fail(
                    f"gradient norm became {grad_norm} at step {step} (epoch {self.state.epoch})"
                )
        lr = float(self.optimizer.param_groups[0]["lr"])
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        self.state.step = step
        self.state.batch_in_epoch += len(micro)
        self.state.tokens_seen += int(tokens)
        self._last = {"step": step, "loss": loss_total / tokens, "lr": lr, "tokens": tokens}
        if grad_norm is not None:
            self._last["grad_norm"] = grad_norm
        self._history.append(self._last)

    def _fail(self, what: str) -> NoReturn:
        kept = (
            f"the last good checkpoint is {self._last_checkpoint}"
            if self._last_checkpoint
            else "no checkpoint was written yet"
        )
        raise NonFiniteLossError(
            f"{what}; stopping without updating the weights ({kept}). Lower the learning rate, "
            "check the data, or clip gradients (clip_norm)."
        )

    def _after_step(self, *, resumed: bool = False) -> str | None:
        """Log, evaluate, save, stop? ``resumed``: at a checkpoint's step, logged already, evaluated
        unless the checkpoint recorded its evaluation; a run out of patience stops again."""
        cfg, step = self.config, self.state.step
        if cfg.log_every and step % cfg.log_every == 0 and not resumed:
            self._log()
        if cfg.eval_every and self.eval_fn is not None and step % cfg.eval_every == 0:
            if not self._evaluated():
                self._evaluate()
            if cfg.patience is not None and self.state.bad_evals >= cfg.patience:
                return "early_stopping"
        if cfg.save_every and step % cfg.save_every == 0 and self._saved != self._progress_mark():
            self._save()
        if cfg.max_steps is not None and step >= cfg.max_steps:
            return "max_steps"
        if cfg.max_time_s is not None:  # rank 0's clock decides for all ranks
            out_of_time = time.perf_counter() - self._start >= cfg.max_time_s
            if dist.broadcast_object(out_of_time):
                return "max_time"
        return None

    def _log(self) -> None:
        now, (t0, tokens0) = time.perf_counter(), self._window
        tokens_per_s = (self.state.tokens_seen - tokens0) / max(now - t0, 1e-9)
        self._window = (now, self.state.tokens_seen)
        elapsed, last = now - self._start, self._last
        self._progress.bound_by_time(
            self.state.step, self.state.step - self._start_step, elapsed, self.config.max_time_s
        )
        self._progress.show(
            loss=last["loss"], lr=last["lr"], tokens_per_s=tokens_per_s, epoch=self.state.epoch
        )
        if self.metrics is not None:
            self.metrics.append(
                {
                    "event": "train",
                    **last,
                    "epoch": self.state.epoch,
                    "tokens_per_s": tokens_per_s,
                    "elapsed_s": elapsed,
                }
            )

    # ----------------------------------------------------------------- evaluation
    def _evaluated(self) -> bool:
        """Whether the current step's evaluation has finished (in this run or before a resume)."""
        return self.state.last_eval.get("step") == self.state.step

    def _progress_mark(self) -> tuple[int, float | None]:
        """(step, step of the last evaluation): a checkpoint with the trainer's mark is up to date."""
        return self.state.step, self.state.last_eval.get("step")

    def _evaluate(self) -> None:
        """Run ``eval_fn``; log it, record it in the state, update the best metric (and
        ``best/``). Until it is recorded a Ctrl-C saves the step as not yet evaluated."""
        cfg = self.config
        self._rng_to_save = rng_state()  # eval_fn may draw random numbers
        self.model.eval()
        with torch.no_grad():
            metrics = {k: float(v) for k, v in self.eval_fn(self.model).items()}
        self.model.train()
        metrics = dist.broadcast_object(metrics)
        evaluation = {"step": self.state.step, **metrics}
        if self.metrics is not None:
            self.metrics.append({"event": "eval", "epoch": self.state.epoch, **evaluation})
        if cfg.metric not in metrics and (cfg.patience is not None or cfg.save_best):
            raise ValueError(f"eval_fn must return the metric {cfg.metric!r} (config.metric), "
                             f"got keys {sorted(metrics)}")
        value, best, lower = metrics.get(cfg.metric), self.state.best_metric, cfg.metric_mode == "min"
        better = value is not None and (best is None or (value < best if lower else value > best))
        if better:
            self.state.best_metric, self.state.bad_evals = value, 0
        elif value is not None:
            self.state.bad_evals += 1
        self.state.last_eval, self._rng_to_save = evaluation, None
        if better and cfg.save_best and self.run_dir is not None:
            self._save(self.run_dir / "best", prune=False)

    # ----------------------------------------------------------------- checkpoints
    def _trainer_pt(self, rngs: list[dict[str, Any]]) -> bytes:
        buffer = io.BytesIO()
        save_trainer_state(
            buffer,
            state=self.state,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            rng=rngs,
            extra={"config": asdict(self.config)},
        )
        return buffer.getvalue()

    def _save(
        self,
        directory: Path | None = None,
        *,
        prune: bool = True,
        rngs: list[dict[str, Any]] | None = None,
    ) -> Path | None:
        """Write a checkpoint (rank 0). Without ``rngs`` every rank must call it: the RNG
        states of all ranks are gathered."""
        collective = rngs is None
        rngs = dist.gather_objects(rng_state()) if collective else rngs
        if self.run_dir is None and directory is None:
            return None
        path = directory or checkpoint_path(self.run_dir, self.state.step)
        if self.is_main:
            write_checkpoint(path, self.model, self._trainer_pt(rngs), self.files, self.save_fn)
            if prune and self.run_dir is not None:
                prune_checkpoints(self.run_dir, self.config.keep_last_k)
        if collective:
            dist.barrier()
        if directory is None:  # a step checkpoint (not "best")
            self._last_checkpoint, self._saved = path, self._progress_mark()
        return path

    def save_checkpoint(self, directory: str | Path | None = None) -> Path | None:
        """Write a checkpoint of the current state now (every rank must call it)."""
        return self._save(Path(directory) if directory else None)

    def _save_interrupted(self) -> None:
        """Ctrl-C: save the state as of the last completed step. No collectives (the other
        ranks may be anywhere), so under torchrun rank 0's RNG state stands in for all."""
        if self.run_dir is None:
            return
        if self._saved != self._progress_mark():
            rng = self._rng_to_save or rng_state()
            self._save(rngs=[rng] * self.world_size)
        if self.is_main and self._last_checkpoint is not None:
            print(f"interrupted: saved {self._last_checkpoint} (resume with --resume "
                  f"{self.run_dir})", flush=True)

    def _resume(self, directory: Path) -> None:
        load_model_weights(self.model, directory)
        self.state, _ = restore_trainer_state(
            directory / "trainer.pt",
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            rank=self.rank,
        )
        check_steps_left(directory, self.config, self.state)  # before metrics.jsonl is cut
        self._last_checkpoint = directory
        if self.metrics is not None:  # what the checkpoint's run logged after it is logged again
            self.metrics.truncate_after(self.state.step, evaluated=self._evaluated())
