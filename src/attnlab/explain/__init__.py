"""Explanations of a model's output, and their scores where the right answer is known.

* :mod:`~attnlab.explain.rollout` — attention rollout and attention flow over a stack of
  attention maps (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"), flow by
  :mod:`~attnlab.explain.maxflow` (Edmonds–Karp);
* :mod:`~attnlab.explain.graphs` — an encoder-decoder Transformer's and a recurrent attentive
  decoder's attention as such a stack;
* :mod:`~attnlab.explain.recording` — the weights a model computes, recorded by forward hooks;
* :mod:`~attnlab.explain.gradients` — gradient × attention and integrated gradients
  (Sundararajan, Taly & Yan 2017, "Axiomatic Attribution for Deep Networks");
* :mod:`~attnlab.explain.scores` — the pointing game, mass on the truth, overlap.

The lab ``attnlab lab explanations`` scores each method on the captioner, the Neural Turing
Machine and the translators, whose right answers are known.
"""

from attnlab.explain.gradients import Attribution, gradient_x_attention, integrated_gradients, per_key
from attnlab.explain.graphs import encoder_decoder_graph, recurrent_graph
from attnlab.explain.maxflow import Flow, max_flow
from attnlab.explain.recording import recording_attention
from attnlab.explain.rollout import attention_flow, attention_rollout, layer_maps, with_residual
from attnlab.explain.scores import mass_on_truth, overlap, pointing_hit, positive_share, uniform_pointing

__all__ = [
    "Attribution", "Flow", "attention_flow", "attention_rollout", "encoder_decoder_graph",
    "gradient_x_attention", "integrated_gradients", "layer_maps", "mass_on_truth", "max_flow",
    "overlap", "per_key", "pointing_hit", "positive_share", "recording_attention", "recurrent_graph",
    "uniform_pointing", "with_residual",
]
