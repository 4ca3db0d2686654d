"""The decks' cost tables beside measurements on this CPU (``attnlab lab complexity``).

Hasegawa-Johnson (ECE 417 Lecture 21), "Why Self-Attention?" gives per-layer cost and path
length for recurrent, convolutional and self-attention layers; Ba (CSC413 Lecture 8),
"Computational Cost and Parallelism" training and test complexity and memory, sequential
operations and path length for an RNN, an RNN with attention and a Transformer; Li (Transformer
Part I), "Complexity of Attention" the O(n²d) cost and O(n²) memory of the score matrix;
Steinert-Threlkeld (Transformers I), "Initial WMT Results" the BLEU and training FLOPs of
Vaswani et al. 2017. The lab prints those tables as the slides do, then the measured side:

1. one layer of each type at a fixed width (attnlab's :class:`MultiHeadAttention`, fused and
   explicit; ``torch.nn.GRU``; ``torch.nn.Conv1d``) at growing ``n``: FLOPs counted (and equal
   to :mod:`attnlab.analysis`), forward time, activation and peak memory, dependent steps and
   path length, with log-log exponents fitted over the larger ``n``
   (:mod:`~attnlab.labs.complexity.measure`);
2. a GPT generating ``N`` tokens with and without the KV cache
   (:mod:`~attnlab.labs.complexity.decoding`);
3. the WMT table beside attnlab's trained translators, their training FLOPs counted
   (:mod:`~attnlab.labs.complexity.translator`).

The lab itself (its tables and report) is :mod:`~attnlab.labs.complexity.lab`; its pictures
:mod:`~attnlab.labs.complexity.plots`.
"""

from attnlab.labs.complexity.lab import FULL, QUICK, Settings, run

__all__ = ["FULL", "QUICK", "Settings", "run"]
