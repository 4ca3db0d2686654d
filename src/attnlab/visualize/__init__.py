"""Pictures, drawn with matplotlib's object-oriented ``Figure`` API (imported inside the
functions, so ``import attnlab`` stays light).

* :mod:`~attnlab.visualize.attention` — attention heatmaps, per-head panels, alignments
* :mod:`~attnlab.visualize.memory` — a Neural Turing Machine's memory access, its sorting and its
  generalisation curve
* :mod:`~attnlab.visualize.speech` — a recognizer's alignment over its spectrogram
"""

from attnlab.visualize.attention import (
    draw_attention,
    plot_alignment,
    plot_attention,
    plot_attention_heads,
    printable,
)
from attnlab.visualize.figure import save_figure
from attnlab.visualize.memory import plot_generalisation, plot_memory_access, plot_sort_mechanism
from attnlab.visualize.speech import plot_speech_alignment, plot_speech_beside_translation

__all__ = [
    "draw_attention",
    "plot_alignment",
    "plot_attention",
    "plot_attention_heads",
    "plot_generalisation",
    "plot_memory_access",
    "plot_sort_mechanism",
    "plot_speech_alignment",
    "plot_speech_beside_translation",
    "printable",
    "save_figure",
]
