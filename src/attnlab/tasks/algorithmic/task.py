"""The Neural Turing Machine's algorithmic tasks as a training task (Graves, Wayne & Danihelka
2014, §4; Ba (CSC413 Lecture 8), "Neural Turing Machines").

A recipe (:mod:`attnlab.tasks.algorithmic.recipe`) names the task
(copy, repeat copy, associative recall, priority sort), the model (``ntm`` or the
``sequence_lstm`` baseline) and the training range. Training draws an endless, seeded stream of
episodes (:mod:`attnlab.data.algorithmic`) at random lengths in that range; each step's loss is
the paper's *cost per sequence*: the binary cross-entropy summed over the answer's bits, in
nats (the paper plots bits: divide by ln 2); the trainer's count of "tokens" (its
``tokens_per_s``) counts sequences here.

Validation and the final test count **bit errors per sequence**: an output bit is the logit's
sign, compared with the target over the scored (answer) steps. The report scores each test
length (generalisation beyond the training range), writes ``results.json`` and, for an NTM,
draws its memory access (:func:`draw_memory_access`); for an NTM that sorts, it also measures
and draws how (:func:`measure_sorting`, the paper's Figure 17).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.atomic import write_atomic
from attnlab.data.algorithmic import TASKS, Episode, task_dims
from attnlab.devices import model_device, to_device
from attnlab.generation.state import inference
from attnlab.memory import Need, sized
from attnlab.models import load_pretrained
from attnlab.tasks.algorithmic.recipe import AlgorithmicData, AlgorithmicRecipe
from attnlab.tasks.algorithmic.sorting import sort_mechanism
from attnlab.tasks.base import EvaluateRequest, Task, load_saved_recipe, register_task
from attnlab.training import TrainResult
from attnlab.training.losses import mean_loss
from attnlab.validation import counted

VAL_BATCH = 10  # sequences per validation / test batch (one length each)
SORT_SEQUENCES = 100  # sequences the sort's mechanism is measured on
SORT_NUMBERS = ("write_rank_correlation", "reads_find_writes", "read_rank_correlation", "shared_location",
                "errors_at_shared")


def draw_episode(
    data: AlgorithmicData, batch: int, generator: torch.Generator, *,
    length: int | None = None, repeats: int | None = None, limits: tuple[int, int] | None = None,
) -> Episode:
    """``batch`` sequences of the recipe's task; ``length`` (and ``repeats``) drawn uniformly
    from the training range when not given, capped by ``limits = (max_length, max_repeats)``
    (the curriculum's range, :meth:`AlgorithmicData.range_at`) when given."""
    draw = random.Random(int(torch.randint(0, 2**31, (1,), generator=generator)))
    max_length, max_repeats = limits or (data.max_length, data.max_repeats)
    length = length if length is not None else draw.randint(data.min_length, max_length)
    make = TASKS[data.task]
    if data.task == "copy":
        return make(batch, length, bits=data.bits, generator=generator)
    if data.task == "repeat_copy":
        repeats = repeats if repeats is not None else draw.randint(data.min_repeats, max_repeats)
        return make(batch, length, repeats, bits=data.bits, max_repeats=data.max_repeats, generator=generator)
    if data.task == "associative_recall":
        return make(batch, length, item_length=data.item_length, bits=data.bits, generator=generator)
    keep = None if data.keep is None else min(data.keep, length)
    return make(batch, length, keep=keep, bits=data.bits, generator=generator)


def train_episodes(data: AlgorithmicData) -> Callable[[int], Iterator[Episode]]:
    """``train_data(epoch)`` for the Trainer: an endless stream seeded by ``(seed, epoch)``, so
    a resumed run replays it (the curriculum counts the batches drawn, so it replays too)."""

    def epoch_batches(epoch: int) -> Iterator[Episode]:
        generator = torch.Generator().manual_seed(data.seed * 1_000_003 + epoch)
        for batch in itertools.count():
            yield draw_episode(data, data.batch_size, generator, limits=data.range_at(batch))

    return epoch_batches


def fixed_episodes(
    data: AlgorithmicData, count: int, seed: int, *, length: int | None = None, repeats: int | None = None
) -> list[Episode]:
    """``count`` sequences in batches of up to :data:`VAL_BATCH`, the same every call."""
    generator = torch.Generator().manual_seed(seed)
    sizes = [min(VAL_BATCH, count - start) for start in range(0, count, VAL_BATCH)]
    return [draw_episode(data, size, generator, length=length, repeats=repeats) for size in sizes]


def sequence_cost(model: nn.Module, batch: Episode) -> tuple[Tensor, int]:
    """The binary cross-entropy summed over the scored bits, and the number of sequences."""
    logits = model(batch.inputs)  # (B, T, output_dim)
    bits = F.binary_cross_entropy_with_logits(logits.float(), batch.targets, reduction="none").sum(-1)
    return (bits * batch.mask).sum(), batch.inputs.shape[0]


def bit_errors(model: nn.Module, batches: list[Episode]) -> float:
    """Bit errors per sequence: output bits (the logits' signs) that differ from the targets
    over the scored steps, averaged over the sequences of ``batches``."""
    device, errors, sequences = model_device(model), 0.0, 0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for batch in batches:
                batch = to_device(batch, device)
                wrong = (model(batch.inputs) > 0).float() != batch.targets  # (B, T, bits)
                errors += float((wrong & batch.mask.unsqueeze(-1)).sum())
                sequences += batch.inputs.shape[0]
    finally:
        model.train(was_training)
    return errors / sequences


def score_lengths(model: nn.Module, recipe: AlgorithmicRecipe) -> dict[str, dict[str, float]]:
    """Bit errors per sequence at each test length (× each test repeat count for repeat copy),
    ``eval.test_sequences`` sequences each, seeded by ``data.seed``."""
    data, ev = recipe.data, recipe.eval
    repeats = ev.test_repeats if data.task == "repeat_copy" else [None]
    scores: dict[str, dict[str, float]] = {}
    for r in repeats:
        key = "bit_errors" if r is None else f"bit_errors_repeats_{r}"
        scores[key] = {
            str(length): bit_errors(model, fixed_episodes(
                data, ev.test_sequences, data.seed + 20_000 + length, length=length, repeats=r
            ))
            for length in ev.test_lengths
        }
    return scores


@register_task
class AlgorithmicTask(Task):
    """An NTM (or its LSTM baseline) on one of the paper's tasks (see the module docstring)."""

    recipe_class = AlgorithmicRecipe
    recipe: AlgorithmicRecipe

    def prepare(self, resume: Path | None) -> None:
        d = self.recipe.data
        self.val_batches = fixed_episodes(d, self.recipe.eval.val_sequences, d.seed + 10_000)

    def build_model(self) -> nn.Module:
        return self.recipe.model.build_model()

    def describe(self, model: nn.Module) -> str:
        d = self.recipe.data
        return (
            f"{model.model_type}: {model.num_parameters():,} parameters; task {d.task}, lengths "
            f"{d.min_length}-{d.max_length}, {counted(d.batch_size, 'sequence')} a step"
        )

    def memory_needs(self) -> list[Need]:
        """The model; the validation episodes :meth:`prepare` keeps; the larger of a training
        batch and the test episodes of the longest test length (an episode of ``length`` has
        more than ``length`` steps of the task's input and output channels); for an NTM, its
        memory for a training batch."""
        d, ev, model = self.recipe.data, self.recipe.eval, self.recipe.model
        channels = {"channels": sum(task_dims(d.task, d.bits))}
        steps = {"(data.min_length + 1)": d.min_length + 1, **channels}
        kept = {"eval.val_sequences": ev.val_sequences, **steps}
        val = sized("the validation episodes", kept, 4, host=True)
        train = sized("a training batch", {"data.batch_size": d.batch_size, **steps}, 4)
        longest = {"(max(eval.test_lengths) + 1)": max(ev.test_lengths) + 1, **channels}
        test = sized("the longest test episodes", {"eval.test_sequences": ev.test_sequences, **longest}, 4)
        needs = [*super().memory_needs(), val, max(train, test, key=lambda need: need.nbytes)]
        if model.type == "ntm":
            needs.append(sized("the NTM's memory", {
                "data.batch_size": d.batch_size, "model.memory_size": model.settings["memory_size"],
                "model.memory_width": model.settings["memory_width"]}, 4))
        return needs

    def train_data(self) -> Callable[[int], Iterator[Episode]]:
        return train_episodes(self.recipe.data)

    def loss(self, model: nn.Module, batch: Episode) -> tuple[Tensor, int]:
        return sequence_cost(model, batch)

    def validate(self, model: nn.Module) -> dict[str, float]:
        return {
            "val_loss": mean_loss(model, sequence_cost, self.val_batches),
            "bit_errors": bit_errors(model, self.val_batches),
        }

    def report(self, model: nn.Module, result: TrainResult) -> dict[str, Any]:
        """Score every test length, draw the memory access, write ``results.json``."""
        scores = score_lengths(model, self.recipe)
        pictures = draw_report_pictures(model, self.recipe, self.run_dir)
        sorting = {}
        if model.model_type == "ntm" and self.recipe.data.task == "priority_sort":
            sorting, picture = measure_sorting(model, self.recipe, self.run_dir / "sort_mechanism.png")
            pictures.append(picture)
        results = {
            **scores,
            **sorting,
            "task": self.recipe.data.task,
            "model_type": model.model_type,
            "parameters": model.num_parameters(),
            "sequences_seen": result.step * self.recipe.data.batch_size,
            "steps": result.step,
            "wall_time_s": result.seconds,
            "stopped": result.stopped,
            "last_eval": result.last_eval,
            "checkpoint": str(result.last_checkpoint),
            "pictures": [str(p) for p in pictures],
        }
        write_atomic(self.run_dir / "results.json", json.dumps(results, indent=2) + "\n")
        print(self.format_scores(scores))
        for name, value in sorting.items():
            print(f"{name.replace('_', ' ')}: {value:.3f}")
        for picture in pictures:
            print(f"picture: {picture}")
        print(f"{counted(result.step, 'step')} in {result.seconds:.1f} s ({result.stopped}); checkpoint: "
              f"{result.last_checkpoint}", flush=True)
        return results

    @classmethod
    def evaluate(cls, checkpoint: Path, request: EvaluateRequest) -> dict[str, Any]:
        """Bit errors per sequence at the checkpoint recipe's test lengths."""
        cls.eval_split(request)
        recipe = load_saved_recipe(checkpoint, AlgorithmicRecipe)
        return score_lengths(load_pretrained(checkpoint, device=request.device), recipe)

    @classmethod
    def format_scores(cls, scores: Mapping[str, Any]) -> str:
        lines = []
        for key, by_length in scores.items():
            cells = "  ".join(f"{length}: {errors:.2f}" for length, errors in by_length.items())
            lines.append(f"{key.replace('_', ' ')} per sequence by length  {cells}")
        return "\n".join(lines)


def draw_memory_access(model: nn.Module, episode: Episode, path: Path, *, title: str = "") -> Path:
    """Run an NTM on the first sequence of ``episode`` with its trace and draw the first write
    and read heads (:func:`attnlab.visualize.plot_memory_access`)."""
    from attnlab.visualize import plot_memory_access

    episode = to_device(episode, model_device(model))
    with inference(model):
        logits, trace = model(episode.inputs[:1], return_trace=True)
    outputs = torch.sigmoid(logits[0]) * episode.mask[0, :, None]
    return plot_memory_access(
        episode.inputs[0], episode.targets[0], outputs, trace.write_weights[0, :, 0],
        trace.read_weights[0, :, 0], trace.add[0, :, 0], path, title=title,
    )


def draw_report_pictures(model: nn.Module, recipe: AlgorithmicRecipe, run_dir: Path) -> list[Path]:
    """The memory access of an NTM at the longest training length and the longest test length
    (:func:`draw_memory_access`); none for the LSTM, which has no memory to show."""
    if model.model_type != "ntm":
        return []
    data = recipe.data
    return [
        draw_memory_access(
            model, fixed_episodes(data, 1, data.seed + 30_000, length=length)[0],
            run_dir / f"memory_{name}_length_{length}.png", title=f"{data.task}, length {length}",
        )
        for name, length in (("train", data.max_length), ("test", max(recipe.eval.test_lengths)))
    ]


def measure_sorting(model: nn.Module, recipe: AlgorithmicRecipe, path: Path) -> tuple[dict[str, float], Path]:
    """How an NTM sorts (:func:`attnlab.tasks.algorithmic.sorting.sort_mechanism`) on
    :data:`SORT_SEQUENCES` seeded sequences of the longest training length, and the picture
    (:func:`attnlab.visualize.plot_sort_mechanism`, the first sequence's weightings)."""
    from attnlab.visualize import plot_sort_mechanism

    data = recipe.data
    batches = fixed_episodes(data, SORT_SEQUENCES, data.seed + 30_000, length=data.max_length)
    inputs, targets = (torch.cat([getattr(b, name) for b in batches]) for name in ("inputs", "targets"))
    length = data.max_length
    with inference(model):
        logits, trace = model(inputs.to(model_device(model)), return_trace=True)
    errors = ((logits.cpu() > 0).float() != targets)[:, length + 1:].sum(-1)  # (B, keep)
    found = sort_mechanism(inputs, trace.write_weights.cpu(), trace.read_weights.cpu(), data.bits, errors)
    numbers = {name: getattr(found, name) for name in SORT_NUMBERS}
    write = trace.write_weights[0, :length, found.head]  # locations counted from the cut
    read = trace.read_weights[0, length + 1:].sum(1)
    write, read = (weights.roll(-found.cut, dims=-1).cpu() for weights in (write, read))
    picture = plot_sort_mechanism(
        found.priority, found.write_location, write, read, found.wanted_location[0], path,
        correlation=found.write_rank_correlation, found=found.reads_find_writes,
        title=f"{data.task}, length {length}: where write head {found.head} and the read heads go "
              f"(locations counted from {found.cut})",
    )
    return numbers, picture
