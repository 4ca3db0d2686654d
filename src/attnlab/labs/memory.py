"""The Neural Turing Machine's memory access from a trained checkpoint (Ba (CSC413 Lecture 8),
"Neural Turing Machines (optional)": "Pattern of memory accesses for the read and write
heads"; Graves, Wayne & Danihelka 2014, Figures 4-6).

The lab runs a trained NTM (any of its tasks: copy, repeat copy, associative recall, priority
sort; the task and sizes come from the checkpoint's ``recipe.json``) on seeded test sequences
at the longest training length and at each test length, keeps its trace (the first write and
read head's weightings ``w_t`` over the ``N`` memory locations at every step) and measures:

* **sharpness**: the largest weight ``max_n w_t(n)`` of a weighting, averaged over the write
  steps that store the answer's vectors and over the answer steps that read them (1 = one
  location, ``1/N`` = spread over the whole memory);
* **read follows write**: each answer step ``a`` must return the input vector of one input
  step ``s`` (:func:`answer_sources`: for copy the k-th answer is the k-th input; for priority
  sort the k-th highest priority; ...). The read follows write when the read head's most
  weighted location at ``a`` is the location the write head weighted most at step ``s + lag``:
  a machine may store a vector one step after it reads it (the controller carries it), so
  ``lag`` is the one of 0, 1, 2 that fits best over all the lab's sequences, and is reported.
  The score is the fraction of answer steps that follow.

Bit errors per sequence (:func:`attnlab.tasks.algorithmic.bit_errors`) stand beside them, and
the pictures are the task's own (:func:`attnlab.tasks.algorithmic.draw_memory_access`: inputs,
targets, outputs, add vectors, write and read weightings over time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from attnlab import validation
from attnlab.labs.checkpoints import DefaultRun, find_checkpoints
from attnlab.labs.report import LabOptions, LabReport

TITLE = "Memory: where the Neural Turing Machine writes and reads"
SOURCE = 'Ba (CSC413 Lecture 8), "Neural Turing Machines (optional)"'
NTM_RUN = "runs/ntm/copy_ntm_seed0"
DEFAULTS = (DefaultRun(NTM_RUN, f"attnlab train --config configs/ntm_copy.toml --run-dir {NTM_RUN}"),)
LAGS = (0, 1, 2)
SEQUENCES = {False: 50, True: 4}  # quick → sequences per length
HEADLINE = ("write_sharpness", "read_sharpness", "read_follows_write")  # at the longest training length
SEED = 40_000  # the lab's own test sequences, apart from the task's validation and test seeds


def answer_sources(task: str, inputs: Tensor, bits: int) -> list[tuple[int, int]]:
    """``(answer step, input step)`` pairs of one sequence ``inputs (T, input_dim)`` of ``task``
    (the layouts of :mod:`attnlab.data.algorithmic`): the answer at that step is the vector the
    input carried at that input step. Repeat copy's end marker and the query steps have none."""
    steps = inputs.shape[0]
    delimiter = torch.nonzero(inputs[:, bits] == 1).flatten().tolist()  # channel `bits`
    if task == "copy":
        length = (steps - 1) // 2
        return [(length + 1 + k, k) for k in range(length)]
    if task == "repeat_copy":
        length = delimiter[0]
        return [(length + 1 + m, m % length) for m in range(steps - 2 - length)]
    if task == "priority_sort":
        length = int(torch.nonzero(inputs[:, bits + 1] == 1)[0])
        order = inputs[:length, bits].argsort(descending=True).tolist()
        return [(length + 1 + k, order[k]) for k in range(steps - length - 1)]
    if task == "associative_recall":
        starts = delimiter  # every item opens with a delimiter step
        item = starts[1] - starts[0] - 1
        query_at = int(torch.nonzero(inputs[:, bits + 1] == 1)[0]) + 1
        query = inputs[query_at:query_at + item, :bits]
        found = next(i for i, s in enumerate(starts) if torch.equal(inputs[s + 1:s + 1 + item, :bits], query))
        answer = starts[found + 1] + 1
        return [(steps - item + k, answer + k) for k in range(item)]
    raise ValueError(f"task must be copy, repeat_copy, priority_sort or associative_recall, got {task!r}")


def read_follows_write(
    read: Tensor, write: Tensor, pairs: list[tuple[int, int]], lag: int = 0
) -> tuple[int, int]:
    """Of the ``pairs`` (answer step a, input step s) with ``s + lag`` inside the sequence, how
    many have ``argmax_n read[a] = argmax_n write[s + lag]``, and how many were counted
    (``read``, ``write``: one head's weightings ``(T, N)``)."""
    counted = [(a, s + lag) for a, s in pairs if s + lag < write.shape[0]]
    hits = sum(int(read[a].argmax()) == int(write[t].argmax()) for a, t in counted)
    return hits, len(counted)


@dataclass
class LengthTrace:
    """The weightings of every sequence of one length: ``write``, ``read`` ``(B, T, N)`` (first
    heads) and each sequence's answer pairs."""

    length: int
    write: Tensor
    read: Tensor
    pairs: list[list[tuple[int, int]]] = field(default_factory=list)

    def follows(self, lag: int) -> tuple[int, int]:
        """:func:`read_follows_write` summed over the sequences."""
        sequences = zip(self.read, self.write, self.pairs, strict=True)
        counts = [read_follows_write(r, w, p, lag) for r, w, p in sequences]
        return sum(c[0] for c in counts), sum(c[1] for c in counts)

    def sharpness(self, lag: int) -> tuple[float, float]:
        """Mean ``max_n w_t(n)`` over the storing write steps ``s + lag`` and the answer steps."""
        writes, reads = [], []
        for r, w, pairs in zip(self.read, self.write, self.pairs, strict=True):
            writes += [float(w[s + lag].max()) for _, s in pairs if s + lag < w.shape[0]]
            reads += [float(r[a].max()) for a, _ in pairs]
        return sum(writes) / len(writes), sum(reads) / len(reads)


def trace_length(model, recipe, length: int, count: int) -> tuple[LengthTrace, list]:
    """Run ``model`` on ``count`` seeded sequences of ``length`` with its trace; the trace and
    the episodes."""
    from attnlab.devices import model_device, to_device
    from attnlab.generation.state import inference
    from attnlab.tasks.algorithmic import fixed_episodes

    data = recipe.data
    episodes = fixed_episodes(data, count, SEED + length, length=length)
    writes, reads, pairs = [], [], []
    for episode in episodes:
        with inference(model):
            _, trace = model(to_device(episode, model_device(model)).inputs, return_trace=True)
        writes.append(trace.write_weights[:, :, 0].float().cpu())  # (B, T, N)
        reads.append(trace.read_weights[:, :, 0].float().cpu())
        pairs += [answer_sources(data.task, x, data.bits) for x in episode.inputs]
    return LengthTrace(length, torch.cat(writes), torch.cat(reads), pairs), episodes


def best_lag(traces: list[LengthTrace]) -> int:
    """The lag of :data:`LAGS` with the most answer steps following the write (the smallest on a tie)."""
    def share(lag: int) -> float:
        hits, counted = (sum(x) for x in zip(*(t.follows(lag) for t in traces), strict=True))
        return hits / max(counted, 1)

    return max(LAGS, key=lambda lag: (share(lag), -lag))


def _lengths(recipe, quick: bool) -> list[int]:
    longest_train = recipe.data.max_length
    return [longest_train] if quick else sorted({longest_train, *recipe.eval.test_lengths})


def run(out_dir: Path, options: LabOptions) -> LabReport:
    """Trace the NTM at each length, score its weightings and draw two sequences."""
    from attnlab.models import load_pretrained
    from attnlab.progress import progress
    from attnlab.tasks.algorithmic import bit_errors, draw_memory_access
    from attnlab.tasks.algorithmic.recipe import AlgorithmicRecipe
    from attnlab.tasks.base import load_saved_recipe

    out_dir = Path(out_dir)
    report = LabReport("memory", TITLE, SOURCE)
    checkpoint = find_checkpoints("memory", options, DEFAULTS, ("ntm",))[0]
    recipe = load_saved_recipe(checkpoint, AlgorithmicRecipe)
    model = load_pretrained(checkpoint, device=options.device)
    lengths, count = _lengths(recipe, options.quick), SEQUENCES[options.quick]
    traces, errors = [], {}
    for length in progress(lengths, desc="lengths", enabled=options.progress and not options.quick):
        trace, episodes = trace_length(model, recipe, length, count)
        traces.append(trace)
        errors[length] = bit_errors(model, episodes)
    lag = best_lag(traces)
    _report_numbers(report, checkpoint, recipe, traces, errors, lag, model.config.memory_size)
    drawn = [("train", recipe.data.max_length), ("longest", lengths[-1])]
    for name, length in drawn[: 1 if options.quick else 2]:
        episode = trace_length(model, recipe, length, 1)[1][0]
        path = draw_memory_access(model, episode, out_dir / f"memory_{name}_length_{length}.png",
                                  title=f"{recipe.data.task}, length {length}")
        report.figure(path, f"{recipe.data.task} at length {length}: inputs, targets, outputs, add vectors, "
                            "write and read weightings (locations down, time across)")
    return report


def _report_numbers(report: LabReport, checkpoint: Path, recipe, traces: list[LengthTrace],
                    errors: dict[int, float], lag: int, locations: int) -> None:
    d = recipe.data
    rows = []
    for trace in traces:
        hits, counted = trace.follows(lag)
        write, read = trace.sharpness(lag)
        row = [trace.length, trace.write.shape[0], errors[trace.length], write, read, hits / counted]
        if lag:
            hits0, counted0 = trace.follows(0)
            row.append(hits0 / max(counted0, 1))
        rows.append(row)
        for key, value in zip(("bit_errors", "write_sharpness", "read_sharpness", "read_follows_write"),
                              row[2:6], strict=True):
            report.number(f"{key}_length_{trace.length}", value)
    first = next(row for row in rows if row[0] == d.max_length)  # the longest training length
    for key, value in zip(HEADLINE, first[3:6], strict=True):
        report.number(key, value)
    report.number("task", d.task)
    report.number("checkpoint", str(checkpoint))
    report.number("write_lag", lag)
    report.text(
        f"Checkpoint {checkpoint}: an NTM trained on {d.task.replace('_', ' ')} (lengths {d.min_length}-"
        f"{d.max_length}), {locations} memory locations. At the longest training length ({first[0]}) its "
        f"write weighting puts **{first[3]:.3f}** of its weight on one location and its read weighting "
        f"**{first[4]:.3f}** (uniform: {1 / locations:.4f}); **{first[5]:.1%}** of the answer steps read the "
        f"location written {validation.counted(lag, 'step')} after the matching input step (lag {lag} fits "
        "best)."
    )
    headers = ["length", "sequences", "bit errors / sequence", "write sharpness", "read sharpness",
               f"read follows write (lag {lag})"]
    report.table(headers + (["read follows write (lag 0)"] if lag else []), rows)
