"""Attention where people read it: notebook views of every attnlab model, offline.

Each function returns a view that Jupyter shows inline (``_repr_html_``: one self-contained HTML
fragment drawn by the explorer's vendored canvas scripts, no CDN, no requirejs, any number a
notebook; ``_repr_png_``: the same picture by matplotlib), with PNG and SVG buttons and
``view.save("x.html" | "x.png" | "x.svg")``:

* :func:`heatmap` — token-to-token attention (self, causal, cross), any layer and head or their mean;
* :func:`alignment` — a translator's alignment (Bahdanau et al. 2015, Figure 3);
* :func:`model_view`, :func:`head_view`, :func:`neuron_view` — bertviz's three views (Vig 2019,
  "A Multiscale Visualization of Attention in the Transformer Model"); :func:`queries_and_keys`
  reads a model's ``q`` and ``k`` for the neuron view;
* :func:`caption_attention` — where a captioner looked for each word (Xu et al. 2015, Figure 3);
* :func:`ntm_memory` — a Neural Turing Machine's read and write weightings over time (Graves et
  al. 2014, Figure 6);
* :func:`show` — the view of whatever an attnlab pipeline or model returned;
* :func:`export_html` — a notebook as an nbconvert ``lab`` page with no CDN script.

    from attnlab import views
    from attnlab.pipelines import LanguageModelPipeline

    lm = LanguageModelPipeline.from_pretrained("smollm2")
    views.show(lm.attention("The cat sat on the mat because it was tired."))
"""

from attnlab.views.attention import AttentionView, alignment, head_view, heatmap, model_view
from attnlab.views.captions import CaptionView, caption_attention
from attnlab.views.html import View
from attnlab.views.memory import MemoryView, ntm_memory
from attnlab.views.neuron import NeuronView, QueryKeys, neuron_view, queries_and_keys
from attnlab.views.notebook import export_html, notebook_html
from attnlab.views.show import show

__all__ = [
    "AttentionView",
    "CaptionView",
    "MemoryView",
    "NeuronView",
    "QueryKeys",
    "View",
    "alignment",
    "caption_attention",
    "export_html",
    "head_view",
    "heatmap",
    "model_view",
    "neuron_view",
    "notebook_html",
    "ntm_memory",
    "queries_and_keys",
    "show",
]
