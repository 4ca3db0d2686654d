"""The attention weights a model computes, recorded from outside it by forward hooks.

Two kinds of module give attention weights. A Transformer's stacks, layers and
:class:`~attnlab.attention.multihead.MultiHeadAttention` return them when called with
``return_weights=True`` (``(B, H, n_q, n_k)`` a layer); an RNN decoder's alignment model
(:class:`~attnlab.attention.alignment.Alignment`: Bahdanau's translator, Show, Attend and
Tell's captioner) returns nothing else: its output is ``α_t`` ``(B, S)``, one call a step.
:func:`recording_attention` appends what each module gives, call by call, while the model runs
as it always does; a caller that did not ask for weights still gets its plain output. The
recorded tensors are the ones the model computed with, so ``torch.autograd.grad`` reaches them
(:func:`attnlab.explain.gradients.gradient_x_attention`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

from attnlab.attention.alignment import Alignment

__all__ = ["recording_attention"]


def _hooks_asking(module: nn.Module, sink: list) -> list:
    """Hooks that make ``module`` compute its weights on every call and append them to ``sink``."""
    asked: list[bool] = []

    def before(module, args, kwargs):
        asked.append(bool(kwargs.get("return_weights", False)))
        return args, {**kwargs, "return_weights": True}

    def after(module, args, kwargs, output):
        out, weights = output
        sink.append(weights)
        return output if asked.pop() else out

    return [module.register_forward_pre_hook(before, with_kwargs=True),
            module.register_forward_hook(after, with_kwargs=True)]


def _hook_output(module: nn.Module, sink: list) -> list:
    """A hook appending each output of ``module`` (an alignment model: its weights) to ``sink``."""
    return [module.register_forward_hook(lambda module, args, output: sink.append(output))]


@contextmanager
def recording_attention(*modules: nn.Module) -> Iterator[list[list]]:
    """While active, every call of each of ``modules`` appends its attention weights to that
    module's list (yielded, one list a module, in call order): an
    :class:`~attnlab.attention.alignment.Alignment` its output ``(B, S)``; any other module
    (a :class:`~attnlab.modules.stacks.LayerStack`, a layer, a
    :class:`~attnlab.attention.multihead.MultiHeadAttention`) what it returns with
    ``return_weights=True`` (a stack: its list of per-layer weights)."""
    records: list[list] = [[] for _ in modules]
    handles = []
    for module, sink in zip(modules, records, strict=True):
        handles += (_hook_output if isinstance(module, Alignment) else _hooks_asking)(module, sink)
    try:
        yield records
    finally:
        for handle in handles:
            handle.remove()
