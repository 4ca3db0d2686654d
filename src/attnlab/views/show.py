"""``views.show(x)``: the notebook view of whatever attnlab returned.

=====================================================  ============================================
``x``                                                  view
=====================================================  ============================================
a :class:`~attnlab.views.html.View`                    itself
``LanguageModelPipeline.attention(text)``              :func:`~attnlab.views.model_view` (every
(:class:`~attnlab.pipelines.TokenAttention`)           layer × head, the last layer's first in full)
``TranslationPipeline.attention(src, out)``            :func:`~attnlab.views.alignment`
(:class:`~attnlab.pipelines.translation.Alignment`)    (Bahdanau et al.'s Figure 3)
``EncoderPipeline.attention(sentence)``                :func:`~attnlab.views.head_view` (bertviz's)
(:class:`~attnlab.pipelines.EncodedSentence`)
``CaptioningPipeline.attention(image, ids)``           :func:`~attnlab.views.caption_attention`
(:class:`~attnlab.pipelines.CaptionMaps`), ``image=``  (Xu et al.'s Figure 3)
``NTM(x, return_trace=True)``: ``(logits, trace)`` or  :func:`~attnlab.views.ntm_memory` of sequence
the :class:`~attnlab.models.ntm.NTMTrace`; ``inputs=``  ``index`` (Graves et al.'s Figure 6)
:func:`~attnlab.views.queries_and_keys`'s              :func:`~attnlab.views.neuron_view` (last
:class:`~attnlab.views.QueryKeys`                      layer, first head)
a tensor or an array of weights                        :func:`~attnlab.views.heatmap`
=====================================================  ============================================
"""

from __future__ import annotations

from typing import Any

import torch

from attnlab.models.ntm import NTMTrace
from attnlab.pipelines import Alignment, CaptionMaps, EncodedSentence, TokenAttention
from attnlab.views.attention import alignment, head_view, heatmap, model_view
from attnlab.views.captions import caption_attention
from attnlab.views.html import View
from attnlab.views.memory import ntm_memory
from attnlab.views.neuron import QueryKeys


def _trace(trace: NTMTrace, logits: torch.Tensor | None, inputs: Any, index: int, title: str | None) -> View:
    batch = trace.read_weights.shape[0]
    if not (isinstance(index, int) and 0 <= index < batch):
        raise ValueError(f"index must be an integer in [0, {batch - 1}] (the trace holds {batch} sequences), "
                         f"got {index!r}")
    outputs = None if logits is None else torch.sigmoid(logits[index].detach().float())
    return ntm_memory(trace.read_weights[index], trace.write_weights[index], adds=trace.add[index],
                      inputs=None if inputs is None else inputs[index], outputs=outputs, title=title)


def show(x: Any, *, image: Any = None, inputs: Any = None, index: int = 0, title: str | None = None) -> View:
    """The view of ``x`` (the table above): ``image`` the captioned image of a ``CaptionMaps``,
    ``inputs`` ``(B, T, in)`` the NTM's input and ``index`` its sequence drawn."""
    if isinstance(x, View):
        return x
    if isinstance(x, TokenAttention):
        return model_view(x.tokens, x.weights, title=title)
    if isinstance(x, Alignment):
        return alignment(x.weights, x.source, x.target, title=title)
    if isinstance(x, EncodedSentence):
        return head_view(x.tokens, torch.stack(x.attention), title=title or x.sentence)
    if isinstance(x, CaptionMaps):
        if image is None:
            raise ValueError("a CaptionMaps holds no image: show(maps, image=image) with the image captioned")
        if x.maps is None:
            raise ValueError("this caption has no attention maps (its model reads the mean feature)")
        return caption_attention(image, x.words, x.maps, title=title)
    if isinstance(x, NTMTrace):
        return _trace(x, None, inputs, index, title)
    if isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], NTMTrace):
        return _trace(x[1], x[0], inputs, index, title)
    if isinstance(x, QueryKeys):
        return x.view()
    if isinstance(x, torch.Tensor) or hasattr(x, "__array__"):
        return heatmap(x, title=title)
    raise TypeError(f"views.show has no view of {type(x).__name__}: give it a pipeline's attention, an NTM "
                    "trace, queries_and_keys(...) or a weight array")
