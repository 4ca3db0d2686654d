"""Explaining the Neural Turing Machine's answers, whose write locations are known.

An NTM trained on copy (Graves, Wayne & Danihelka 2014, §4.1; Ba (CSC413 Lecture 8), "Neural
Turing Machines") writes each input vector somewhere in memory and later returns it. For each
answer step ``a`` that returns the vector of input step ``s``
(:func:`attnlab.labs.memory.answer_sources`), the truth is where that vector was written: the
write weighting at step ``s + lag`` (``lag`` the one of 0, 1, 2 the memory lab finds best,
:func:`~attnlab.labs.memory.best_lag`). One case an answer step: the output is the
log-likelihood of the answer's bits as the machine gives them,
``f = Σ_k log σ(±y_ak)`` (the sign of each logit), the candidates the ``N`` memory locations.
Pointing: the most relevant location is the written one (the write weighting's largest);
overlap: ``Σ_n min(p_n, w_n)`` with the write weighting ``w``.

The methods, from the first read head:

* **attention**: the read weighting ``w^read_a`` of the answer step;
* **rollout**, **flow**: over :func:`~attnlab.explain.graphs.recurrent_graph` of the read
  weightings of steps ``0 … a`` (the controller's state carries the earlier reads);
* **gradient × attention**: ``w^read_a ⊙ ∂f/∂w^read_a`` of the answer step, and, **all maps**,
  ``Σ_{t ≤ a} w^read_t ⊙ ∂f/∂w^read_t`` over every step (every read head's);
* **integrated gradients**: over the memory ``M_a`` the answer step reads, from the fresh memory
  (every cell the model's constant ``memory_init``: nothing written), the read weighting held at
  its value, summed over each location's ``M`` cells. The answer is
  ``y_a = W_y [h_a; r_a]`` with ``r_a = w^read_a M_a`` (:class:`~attnlab.models.NTM`), recomputed
  here from the model's own ``output`` layer and :func:`~attnlab.attention.addressing.read_memory`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention.addressing import read_memory
from attnlab.explain import (
    attention_flow,
    attention_rollout,
    gradient_x_attention,
    integrated_gradients,
    per_key,
    recurrent_graph,
)
from attnlab.explain.gradients import Attribution
from attnlab.explain.scores import overlap
from attnlab.labs.explanations.pictures import MemoryExample
from attnlab.labs.explanations.tally import Tally
from attnlab.labs.report import LabOptions
from attnlab.progress import progress_bar


@dataclass
class Run:
    """One batch of sequences run step by step: per step the first read head's weighting
    ``read[t]`` ``(B, N)`` and the write head's ``write[t]`` (views, for reading), the logits
    ``(B, out)``, and what the answer steps need: the controller states ``h[t]`` ``(B, C)``, the
    memories ``memory[t]`` ``(B, N, M)`` and all read heads' weightings ``reads[t]``
    ``(B, R, N)``, the tensors the machine computed with (gradients reach them, not the views)."""

    read: list[Tensor]
    write: list[Tensor]
    logits: list[Tensor]
    h: list[Tensor]
    memory: list[Tensor]
    reads: list[Tensor]


def run_steps(model: nn.Module, inputs: Tensor) -> Run:
    """Run ``model`` over ``inputs`` ``(B, T, input_dim)`` with :meth:`~attnlab.models.NTM.step`,
    keeping the tensors it computed with (under autograd)."""
    state = model.initial_state(inputs.shape[0])
    run = Run([], [], [], [], [], [])
    for t in range(inputs.shape[1]):
        logits, state, _, _ = model.step(inputs[:, t], state)
        run.read.append(state.read_weights[:, 0])
        run.write.append(state.write_weights[:, 0])
        run.logits.append(logits)
        run.h.append(state.h)
        run.memory.append(state.memory)
        run.reads.append(state.read_weights)
    return run


def answer_likelihood(logits: Tensor, signs: Tensor) -> Tensor:
    """``Σ_k log σ(sign_k · y_k)`` per row: ``logits``, ``signs`` ``(B, out)`` → ``(B,)``."""
    return F.logsigmoid(signs * logits).sum(-1)


def recomputed_logits(model: nn.Module, h: Tensor, memory: Tensor, reads: Tensor) -> Tensor:
    """``y = W_y [h; w^read M]``: ``h`` ``(B, C)``, ``memory`` ``(B, N, M)``, ``reads`` ``(B, R, N)``."""
    return model.output(torch.cat([h, read_memory(memory, reads, check=False).flatten(1)], dim=-1))


def _memory_ig(model: nn.Module, run: Run, step: int, signs: Tensor, steps: int) -> Attribution:
    """Integrated gradients of the answer at ``step`` over the memory it reads: attributions
    ``(1, B, N, M)`` (the sequences' likelihoods summed: each sequence's own memory)."""
    h, reads = run.h[step].detach(), run.reads[step].detach()
    memory = run.memory[step].detach()  # (B, N, M)
    fresh = torch.full_like(memory, model.config.memory_init)

    def f(points: Tensor) -> Tensor:  # (k, B, N, M) → (k,): the sequences' likelihoods summed
        k, b = points.shape[:2]
        logits = recomputed_logits(model, h.repeat(k, 1), points.flatten(0, 1), reads.repeat(k, 1, 1))
        return answer_likelihood(logits, signs.repeat(k, 1)).view(k, b).sum(1)

    return integrated_gradients(f, memory, fresh, steps=steps)


def explain_step(
    model: nn.Module, run: Run, step: int, steps: int
) -> tuple[list[dict[str, Tensor]], Attribution]:
    """Each method's relevance ``(N,)`` for the answer at ``step`` of every sequence of ``run``,
    and the integrated gradients' :class:`~attnlab.explain.Attribution`."""
    signs = torch.where(run.logits[step] >= 0, 1.0, -1.0).detach()
    with torch.enable_grad():
        f = answer_likelihood(run.logits[step], signs).sum()  # sequences are independent
        terms = gradient_x_attention(f, run.reads[:step + 1], retain_graph=True)  # (B, R, N) a step
    own, every = per_key(terms[-1:]), per_key(terms)  # (B, N), the read heads summed
    ig = _memory_ig(model, run, step, signs, steps)
    memory_relevance = ig.attributions[0].sum(-1)  # (B, N)
    reads = torch.stack(run.read[:step + 1], dim=1).detach()  # (B, t, N)
    found = []
    for b in range(reads.shape[0]):
        locations = reads.shape[-1]
        graph = recurrent_graph(reads[b])
        rollout = attention_rollout(graph)[locations, :locations]
        flow = attention_flow(graph, [locations], range(locations))[0, :locations]
        found.append({"attention": reads[b, -1].double(), "rollout": torch.from_numpy(rollout.copy()),
                      "flow": torch.from_numpy(flow.copy()), "gradient × attention": own[b].double(),
                      "gradient × attention, all maps": every[b].double(),
                      "integrated gradients": memory_relevance[b].double()})
    return found, ig


def explain_ntm(
    checkpoint: Path, options: LabOptions, tally: Tally, steps: int, sequences: int
) -> MemoryExample:
    """Run the NTM on ``sequences`` seeded sequences at its longest training length (the
    memory lab's test sequences), score every method on every answer step."""
    from attnlab.labs.memory import SEED, LengthTrace, answer_sources, best_lag
    from attnlab.models import load_pretrained
    from attnlab.tasks.algorithmic import fixed_episodes
    from attnlab.tasks.algorithmic.recipe import AlgorithmicRecipe
    from attnlab.tasks.base import load_saved_recipe

    data = load_saved_recipe(checkpoint, AlgorithmicRecipe).data
    model = load_pretrained(checkpoint, device="cpu").eval()
    runs = []
    with torch.enable_grad():
        for episode in fixed_episodes(data, sequences, SEED + data.max_length, length=data.max_length):
            pairs = [answer_sources(data.task, x, data.bits) for x in episode.inputs]
            runs.append((run_steps(model, episode.inputs), pairs))
    traces = [LengthTrace(data.max_length, torch.stack(r.write, 1).detach(), torch.stack(r.read, 1).detach(),
                          pairs) for r, pairs in runs]
    lag = tally.facts["write_lag"] = best_lag(traces)
    example = None
    total = sum(len(run.read) for run, _ in runs)
    with progress_bar(total, unit="step", desc="ntm", enabled=options.progress) as bar:
        for run, pairs in runs:
            scored = _score_run(model, run, pairs, lag, tally, steps, bar)
            example = example or MemoryExample(checkpoint, *scored)
    assert example is not None
    return example


def _score_run(model: nn.Module, run: Run, pairs: list[list[tuple[int, int]]], lag: int, tally: Tally,
               steps: int, bar) -> tuple[dict[str, Tensor], Tensor]:
    """Score every answer step of one batch; the first sequence's relevances ``(A, N)`` and
    write weightings ``(A, N)``."""
    first: dict[str, list[Tensor]] = {}
    truths = []
    answers = sorted({a for p in pairs for a, _ in p})
    bar.update(len(run.read) - len(answers))  # the input steps explain nothing
    for step in answers:
        bar.update(1)
        found, ig = explain_step(model, run, step, steps)
        tally.completeness(ig)
        for b, (relevances, answers) in enumerate(zip(found, pairs, strict=True)):
            for a, s in answers:
                if a != step or s + lag >= len(run.write):
                    continue
                written = run.write[s + lag][b].detach()
                tally.add(relevances, F.one_hot(written.argmax(), written.numel()).bool(),
                          lambda r, w=written: overlap(r, w))
                if b == 0:
                    truths.append(written)
                    for method, r in relevances.items():
                        first.setdefault(method, []).append(r)
    return {m: torch.stack(r) for m, r in first.items()}, torch.stack(truths)
