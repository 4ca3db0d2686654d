"""The task seam: one typed :class:`Task` per kind of job, and one way to train any of them.

A task turns its recipe into data, a model, a loss, a validation and a final report; the
trainer (:class:`~attnlab.training.Trainer`) does the rest the same way for every task —
batches moved to the model's device, bf16 autocast for that device, checkpoints, resume,
metrics, progress. A task registers itself where it is defined (:func:`register_task`), so
``attnlab train --config R`` finds it by the recipe's ``task = "..."`` and ``attnlab
evaluate CKPT`` by the checkpoint's ``model_type`` (the task that model registered with:
``@register_model(task=...)``).

    recipe dict ─ Recipe.from_dict ─▶ Task(recipe, run_dir)
                 task.prepare(resume)             data, tokenizers
                 task.build_model()               seeded with train.seed
                 build_optimizer(recipe.optim)    optimizer + schedule
                 Trainer(model, task.loss, task.train_data(), eval_fn=task.validate, ...)
                 task.report(model, result)       test scores, samples, pictures, results.json
"""

from __future__ import annotations

import dataclasses
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import torch
from torch import Tensor, nn

from attnlab.atomic import write_atomic
from attnlab.checkpoint import RECIPE_FILE, ExtraFiles, load_config, resolve_resume
from attnlab.devices import resolve_device
from attnlab.measure.footprint import memory_report, resident_now
from attnlab.memory import Need, check_fits
from attnlab.models import MODEL_TASKS, task_models
from attnlab.parsing import read_json
from attnlab.signals import reraise
from attnlab.tasks.recipe import Recipe
from attnlab.training import Trainer, TrainResult, build_optimizer
from attnlab.training.distributed import barrier, cleanup, get_rank, init_distributed, is_distributed
from attnlab.training.run_dir import check_steps_left, writing_run
from attnlab.validation import counted, indefinite

TASKS: dict[str, type[Task]] = {}
"""Every registered task class by its recipe's ``task = "..."`` name."""

T = TypeVar("T", bound="type[Task]")
R = TypeVar("R", bound=Recipe)


@dataclass
class EvaluateRequest:
    """What ``attnlab evaluate`` asks of a task: the split (``None``: the task's default), the
    corpora directory, the device and, for the tasks that decode, the beam settings (``None``:
    the ones the checkpoint's recipe saved)."""

    split: str | None = None
    data_dir: str | None = None
    device: str = "cpu"
    beam_size: int | None = None
    length_penalty: float | None = None


class Task(ABC):
    """One kind of training job (translation, language modelling, ...), driven by a recipe.

    Subclasses set ``recipe_class`` (its ``task_name`` names the task; the models registered
    with that task are the ones it trains and whose checkpoints ``attnlab evaluate`` scores
    with it, :func:`~attnlab.models.task_models`), and implement the abstract methods.
    ``self.recipe``, ``self.run_dir``, ``self.data_dir`` and ``self.device`` are set.
    """

    recipe_class: ClassVar[type[Recipe]]
    eval_splits: ClassVar[tuple[str, ...]] = ("test",)
    """The splits :meth:`evaluate` scores, its default first."""
    decodes: ClassVar[bool] = False
    """Whether :meth:`evaluate` decodes with beam search (so a request's beam settings apply)."""

    def __init__(
        self, recipe: Recipe, run_dir: str | Path, *, data_dir: str | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        self.recipe, self.run_dir, self.data_dir = recipe, Path(run_dir), data_dir
        self.device = resolve_device(device)

    # ------------------------------------------------------------------ training
    @abstractmethod
    def prepare(self, resume: Path | None) -> None:
        """Read the data and build the tokenizers (or, ``resume`` given, load its)."""

    @abstractmethod
    def build_model(self) -> nn.Module:
        """A fresh model for the recipe (called after ``torch.manual_seed(train.seed)``)."""

    @abstractmethod
    def train_data(self) -> Iterable | Callable[[int], Iterable]:
        """The training micro-batches, as the :class:`~attnlab.training.Trainer` takes them."""

    @abstractmethod
    def loss(self, model: nn.Module, batch: Any) -> tuple[Tensor, Tensor | int]:
        """``(loss summed over the batch's targets, number of targets)``; ``batch`` is on the
        model's device already."""

    @abstractmethod
    def validate(self, model: nn.Module) -> dict[str, float]:
        """Validation metrics (``val_loss``, ...), called in eval mode without gradients."""

    def run_file(self, name: str, text: str) -> Path:
        """``run_dir/name`` holding ``text``, written atomically by rank 0 alone (under torchrun
        every rank gets the path; only the writer of the run directory writes in it)."""
        path = self.run_dir / name
        return write_atomic(path, text) if get_rank() == 0 else path

    def memory_needs(self) -> list[Need]:
        """What training cannot do without, from the recipe alone (no data read, nothing
        allocated), each a lower bound (:mod:`attnlab.memory`): by default the model with its
        gradients and Adam's moments; a task adds the tensors every step makes (its batch)."""
        return [self.recipe.model.training_need()]

    def checkpoint_files(self) -> ExtraFiles:
        """Files copied into every checkpoint beside the model: ``recipe.json`` and, in
        subclasses, the tokenizer files."""
        return {RECIPE_FILE: json.dumps(self.recipe.to_dict(), indent=2).encode()}

    def describe(self, model: nn.Module) -> str:
        """One line printed before training (model size, data size)."""
        return f"model: {sum(p.numel() for p in model.parameters()):,} parameters"

    @abstractmethod
    def report(self, model: nn.Module, result: TrainResult) -> dict[str, Any]:
        """After training: score, print and write ``results.json``; return the results."""

    # ------------------------------------------------------------------ the prepare command
    @classmethod
    def prepare_data(cls, raw: Mapping[str, Any], data_dir: str | None) -> list[str]:
        """``attnlab prepare``: read the recipe ``raw``'s corpus into the token files training
        reuses; returns the lines to print. A task whose data is made as it trains has none."""
        cls.recipe_class.from_dict(raw)  # a bad recipe is refused all the same
        return [f"nothing to prepare: the {cls.recipe_class.task_name} task makes its data as it trains"]

    # ------------------------------------------------------------------ the evaluate command
    @classmethod
    @abstractmethod
    def evaluate(cls, checkpoint: Path, request: EvaluateRequest) -> dict[str, Any]:
        """Score a checkpoint of one of the task's models (``attnlab evaluate``)."""

    @classmethod
    @abstractmethod
    def format_scores(cls, scores: Mapping[str, Any]) -> str:
        """The lines ``attnlab evaluate`` prints for :meth:`evaluate`'s scores."""

    @classmethod
    def eval_split(cls, request: EvaluateRequest) -> str:
        """The split ``request`` asks :meth:`evaluate` for (default: the first of
        :attr:`eval_splits`). Refused in one line: a split the task does not have, and beam
        settings for a task that scores without decoding (they would be ignored)."""
        task = cls.recipe_class.task_name
        if not cls.decodes and (request.beam_size is not None or request.length_penalty is not None):
            *others, last = sorted(name for name, c in TASKS.items() if c.decodes)
            decoding = f"{', '.join(others)} and {last}" if others else last
            raise ValueError(
                f"--beam and --length-penalty set how {decoding} checkpoints decode; "
                f"{indefinite(task)} checkpoint is scored without decoding"
            )
        split = request.split or cls.eval_splits[0]
        if split not in cls.eval_splits:
            raise ValueError(f"--split must be one of {', '.join(cls.eval_splits)} for "
                             f"{indefinite(task)} checkpoint, got {split!r}")
        return split


def run_header(task: Task) -> str:
    """The first line of a run: versions, threads, device, run directory (what the numbers
    that follow depend on)."""
    from attnlab import __version__, allocator

    threads = counted(torch.get_num_threads(), "thread")
    return (
        f"attnlab {__version__} · torch {torch.__version__} · {threads} · malloc {allocator.in_use()} · "
        f"device {task.device} · task {task.recipe.task} · run {task.run_dir}"
    )


def register_task(cls: T) -> T:
    """Class decorator: make ``cls`` the task of recipes with ``task = cls.recipe_class.task_name``."""
    name = cls.recipe_class.task_name
    if TASKS.get(name, cls) is not cls:
        raise ValueError(f"task {name!r} of {cls.__name__} is already registered by {TASKS[name].__name__}")
    TASKS[name] = cls
    return cls


def task_class(name: str) -> type[Task]:
    """The task registered as ``name`` (``ValueError`` naming the known ones otherwise)."""
    if name not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {name!r}")
    return TASKS[name]


def task_for_checkpoint(checkpoint: str | Path) -> type[Task]:
    """The task that scores checkpoints of this checkpoint's ``model_type``: the one its model
    registered with."""
    model_type = load_config(checkpoint).get("model_type")
    task = MODEL_TASKS.get(model_type)
    if task in TASKS:
        return TASKS[task]
    known = [t for name in TASKS for t in task_models(name)]
    raise ValueError(
        f"checkpoint {checkpoint} has model_type {model_type!r}; this command takes "
        f"{' or '.join(known)} checkpoints"
    )


def saved_recipe(checkpoint: str | Path) -> dict[str, Any]:
    """The recipe dict a checkpoint's ``recipe.json`` holds (``ValueError`` naming the file
    when it is missing or not a JSON object)."""
    file = Path(checkpoint) / RECIPE_FILE
    if not file.is_file():
        raise ValueError(f"checkpoint {checkpoint} has no {RECIPE_FILE}; give the recipe with --config")
    return read_json(file, "recipe")


def load_saved_recipe(checkpoint: str | Path, cls: type[R] | None = None) -> R:
    """A checkpoint's ``recipe.json`` parsed as ``cls`` (default: the recipe class of the task
    it names); a missing, unreadable or invalid one is a ``ValueError`` naming the file."""
    data = saved_recipe(checkpoint)
    try:
        if cls is None:
            if "task" not in data:
                raise ValueError("a recipe must name its task at the top level")
            cls = task_class(data["task"]).recipe_class
        return cls.from_dict(data)
    except ValueError as err:
        raise ValueError(f"{Path(checkpoint) / RECIPE_FILE}: {err}") from None


def check_continues(recipe: Recipe, checkpoint: Path) -> None:
    """Refuse to resume ``checkpoint`` under a recipe whose data, model or optimizer differ from
    the run's own (:meth:`Recipe.check_continues`); a checkpoint without a recipe passes."""
    if not (checkpoint / RECIPE_FILE).is_file():
        return
    recipe.check_continues(load_saved_recipe(checkpoint, type(recipe)), checkpoint)


def train(
    recipe: Mapping[str, Any],
    *,
    run_dir: str | Path,
    resume: str | Path | None = None,
    data_dir: str | None = None,
    device: str | torch.device = "cpu",
    overwrite: bool = False,
) -> Path:
    """Train the task a recipe dict names (see the module docstring); returns ``run_dir``.

    ``run_dir`` must be empty, or ``resume``'s own run, or ``overwrite`` replaces the earlier
    run in it (:mod:`attnlab.training.run_dir`). Every check on the recipe, the resumed
    checkpoint and the run directory comes before anything is written, and the directory is
    locked from before the data is read to after the report; a run refused after that (by
    its data) leaves no directory it created behind. A run interrupted by Ctrl-C or SIGTERM
    saves a resumable checkpoint and re-raises the interruption instead of going on to the
    report (:mod:`attnlab.signals`)."""
    if "task" not in recipe:
        raise ValueError('a recipe must name its task at the top level, e.g. task = "translation"')
    joined, device = join_process_group(device)
    try:
        return _train(recipe, run_dir=run_dir, resume=resume, data_dir=data_dir, device=device,
                      overwrite=overwrite)
    finally:
        if joined:
            cleanup()


def join_process_group(device: str | torch.device) -> tuple[bool, str | torch.device]:
    """Under ``torchrun`` (``WORLD_SIZE`` > 1), join its process group — gloo for the CPU, else
    nccl on this process's ``cuda:LOCAL_RANK`` — and say so; else nothing."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or is_distributed():
        return False, device
    on_cpu = resolve_device(device).type == "cpu"
    info = init_distributed("gloo" if on_cpu else None)
    return True, device if on_cpu else info.device


def _prepare_in_turn(task: Task, resume: Path | None) -> None:
    """Rank 0 prepares first (it fills the cache of token files and writes the run's files),
    then the other ranks, reading what it wrote."""
    if get_rank() == 0:
        task.prepare(resume)
    barrier()
    if get_rank() != 0:
        task.prepare(resume)


def _train(
    recipe: Mapping[str, Any], *, run_dir: str | Path, resume: str | Path | None, data_dir: str | None,
    device: str | torch.device, overwrite: bool,
) -> Path:
    base = resident_now()  # the process before any tensor of the run
    cls = task_class(recipe["task"])
    parsed = cls.recipe_class.from_dict(recipe)
    task = cls(parsed, run_dir, data_dir=data_dir, device=device)
    check_fits(task.memory_needs(), task.device)  # before any data is read or model built
    resume_dir = None if resume is None else Path(resume)
    at_step = None  # the resumed checkpoint's step
    if resume_dir is not None:
        checkpoint = resolve_resume(resume_dir)
        check_continues(parsed, checkpoint)
        at_step = check_steps_left(checkpoint, parsed.train).step
    # The lock and the run directory's checks come before the data: a mistaken second run is
    # refused before it overwrites the first run's tokenizer files.
    with writing_run(task.run_dir, resume=resume_dir, overwrite=overwrite, writer=get_rank() == 0):
        print(run_header(task), flush=True)
        if at_step is not None and at_step == parsed.train.max_steps:
            print(f"{checkpoint} is at train.max_steps={at_step} already: nothing left to train, "
                  f"finishing the run (evaluation, report)", flush=True)
        _prepare_in_turn(task, resume_dir)
        torch.manual_seed(parsed.train.seed)
        model = task.build_model().to(task.device)
        print(task.describe(model), flush=True)
        optimizer, scheduler = build_optimizer(parsed.optim, model, max_steps=parsed.train.max_steps)
        measure = parsed.train.measure_memory is not False  # on unless the recipe says false
        config = dataclasses.replace(parsed.train, run_dir=str(task.run_dir), measure_memory=measure)
        trainer = Trainer(
            model, optimizer, task.loss, task.train_data(), config,
            scheduler=scheduler, eval_fn=task.validate, files=task.checkpoint_files(),
        )
        result = trainer.fit(resume_from=resume_dir)
        if result.stopped == "interrupted":
            reraise(result.signal)
        if get_rank() == 0:  # under torchrun, rank 0 alone reports
            task.report(model, result)
            figures, line = memory_report(result.live_tensor_peak, base)  # the whole command's resident peak
            write_atomic(task.run_dir / "memory.json", json.dumps(figures, indent=2) + "\n")
            print(line, flush=True)
    return task.run_dir
