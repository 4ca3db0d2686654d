"""Explaining the captioner's number words, whose digit boxes are known.

Show, Attend and Tell (Xu et al. 2015; Ba (CSC413 Lecture 8), "Attention-Based Caption
Generation") captions the recipe's seeded test scenes of MNIST digits
(:mod:`attnlab.data.scenes`); every number word of its greedy caption that names a digit of
the scene (:func:`attnlab.tasks.captioning.boxes.word_boxes`) is one case: the output is the
word's log-probability (teacher-forced on the model's own caption), the candidates the ``h × w``
cells of the annotation grid, the truth the cells whose centre lies in that digit's box. The
mass measure is the captions lab's: the positive relevance spread over its cells' pixels, the
share inside the box (:func:`~attnlab.tasks.captioning.boxes.box_share`).

The methods:

* **attention**: ``α_t``, the weights of the step that wrote the word;
* **rollout**, **flow**: over :func:`~attnlab.explain.graphs.recurrent_graph` of ``α_1 … α_t``,
  the first map the mean annotation ``ā`` the initial state reads (uniform);
* **gradient × attention**: ``α_t ⊙ ∂f/∂α_t`` of the step that wrote the word, and, **all
  maps**, ``Σ_{s ≤ t} α_s ⊙ ∂f/∂α_s`` over every step;
* **integrated gradients**: over the pixels from a black image (the scenes' background),
  summed over each cell's pixels.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from attnlab.data.scenes import NUMBER_WORDS
from attnlab.explain import (
    attention_flow,
    attention_rollout,
    gradient_x_attention,
    integrated_gradients,
    per_key,
    recording_attention,
    recurrent_graph,
)
from attnlab.explain.gradients import Attribution
from attnlab.explain.scores import positive_share
from attnlab.labs.explanations.outputs import token_log_probs
from attnlab.labs.explanations.pictures import CaptionExample
from attnlab.labs.explanations.tally import Tally
from attnlab.labs.registry import LabUnavailable
from attnlab.labs.report import LabOptions
from attnlab.progress import progress_bar
from attnlab.tasks.captioning.boxes import box_share, word_boxes

Box = tuple[int, int, int, int]


def cells_in_box(box: Box, grid: tuple[int, int], size: tuple[int, int]) -> Tensor:
    """``(h · w,)`` bool: the cells of the ``grid`` over an image of ``size`` ``(H, W)`` whose
    centre lies in ``box`` ``(x0, y0, x1, y1)`` (pixels, ends exclusive), row-major."""
    (h, w), (height, width) = grid, size
    ys = (torch.arange(h) + 0.5) * (height / h)  # cell centres, in pixels
    xs = (torch.arange(w) + 0.5) * (width / w)
    x0, y0, x1, y1 = box
    inside_y, inside_x = (ys >= y0) & (ys < y1), (xs >= x0) & (xs < x1)
    return (inside_y[:, None] & inside_x[None, :]).flatten()


def pool_to_grid(pixels: Tensor, grid: tuple[int, int]) -> Tensor:
    """``(H, W)`` pixel values summed over each cell of ``grid`` ``(h, w)`` → ``(h, w)``."""
    h, w = grid
    height, width = pixels.shape
    return pixels.reshape(h, height // h, w, width // w).sum(dim=(1, 3))


def _run(model: nn.Module, images: Tensor, tgt_in: Tensor) -> tuple[Tensor, list[Tensor]]:
    """Teacher-forced logits ``(k, T, V)`` of ``images`` ``(k, C, H, W)`` and ``α_t`` ``(k, L)``
    of each step."""
    with recording_attention(model.attention) as (alphas,):
        logits = model(images, tgt_in.expand(images.shape[0], -1))
    return logits, alphas


def _graph_methods(alphas: Tensor, position: int) -> tuple[Tensor, Tensor]:
    """Rollout and flow ``(L,)`` of step ``position`` over ``alphas`` ``(T, L)``, ``ā`` first."""
    locations = alphas.shape[1]
    graph = recurrent_graph(alphas[:position + 1], torch.full((locations,), 1.0 / locations))
    rollout = attention_rollout(graph)[locations, :locations]
    flow = attention_flow(graph, [locations], range(locations))[0, :locations]
    return torch.from_numpy(rollout.copy()), torch.from_numpy(flow.copy())


def explain_scene(model: nn.Module, image: Tensor, ids: list[int], bos: int, eos: int,
                  positions: list[int], steps: int) -> tuple[list[dict[str, Tensor]], Attribution]:
    """Each method's relevance ``(L,)`` for the caption words at ``positions`` of ``ids`` (the
    model's caption of ``image`` ``(C, H, W)``, teacher-forced after ``bos``), and the
    integrated gradients' :class:`~attnlab.explain.Attribution`."""
    tgt_in, targets = torch.tensor([[bos, *ids]]), torch.tensor([*ids, eos])
    with torch.enable_grad():
        logits, alphas = _run(model, image[None], tgt_in)
        outputs = token_log_probs(logits, targets, positions)[0]  # (m,)
        terms = [gradient_x_attention(outputs[k], alphas, retain_graph=k + 1 < len(positions))
                 for k in range(len(positions))]  # per word: one (1, L) term a step
    weights = torch.cat(alphas).detach()  # (T, L)
    ig = integrated_gradients(lambda x: token_log_probs(_run(model, x, tgt_in)[0], targets, positions),
                              image, steps=steps)  # black baseline
    found = []
    for k, p in enumerate(positions):
        rollout, flow = _graph_methods(weights, p)
        pixels = ig.attributions[k].sum(0)  # (H, W)
        found.append({"attention": weights[p].double(), "rollout": rollout, "flow": flow,
                      "gradient × attention": per_key(terms[k][p:p + 1])[0].double(),
                      "gradient × attention, all maps": per_key(terms[k])[0].double(),
                      "integrated gradients": pool_to_grid(pixels, model.grid).flatten().double()})
    return found, ig


def explain_captioner(checkpoint: Path, options: LabOptions, tally: Tally, steps: int) -> CaptionExample:
    """Caption the recipe's test scenes greedily (the first few in quick mode), score every
    method on every number word that names a digit; the first such scene as the example."""
    from attnlab.labs.captions import load_test_scenes
    from attnlab.pipelines import CaptioningPipeline
    from attnlab.tasks.base import load_saved_recipe
    from attnlab.tasks.captioning.recipe import CaptionRecipe

    captioner = CaptioningPipeline.from_checkpoint(checkpoint, device="cpu")
    if not captioner.draws_attention:
        raise LabUnavailable(f"lab explanations: captioner {checkpoint} has no attention (attention = false)")
    model, tok = captioner.model.eval(), captioner.tokenizer
    test = load_test_scenes(checkpoint, load_saved_recipe(checkpoint, CaptionRecipe), options, tok)
    hyps = captioner.caption_ids(test.images, captioner.settings(beam_size=1), progress=options.progress)
    example = CaptionExample(checkpoint, model.grid)
    with progress_bar(len(hyps), unit="scene", desc="captioner", enabled=options.progress) as bar:
        for image, ids, digits in zip(test.images, hyps, test.digits or [[]] * len(hyps), strict=True):
            _explain_caption(model, tok, image, ids, digits, tally, steps, example)
            bar.update(1)
    return example


def _explain_caption(model: nn.Module, tok, image: Tensor, ids: list[int], digits: list[dict], tally: Tally,
                     steps: int, example: CaptionExample) -> None:
    """Score every method on the number words of one caption; keep the first scene with three
    (else with the most)."""
    words, size = tok.token_strings(ids), tuple(image.shape[-2:])
    named = [(t, box) for t, box in enumerate(word_boxes(words, digits))
             if box is not None and words[t] in NUMBER_WORDS]
    if not named:
        return
    found, ig = explain_scene(model, image, ids, tok.bos_id, tok.eos_id, [t for t, _ in named], steps)
    tally.completeness(ig)
    keep = len(example.words) < min(len(named), 3)
    if keep:
        example.clear()
    for (t, box), relevances in zip(named, found, strict=True):
        truth = cells_in_box(box, model.grid, size)
        tally.add(relevances, truth,
                  lambda r, box=box: box_share(positive_share(r).view(model.grid), box, size))
        if keep:
            example.add(image, " ".join(words), words[t], box, relevances, truth)
