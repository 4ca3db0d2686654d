"""Runnable lecture figures: each lab shows one idea of the lectures on real data or real
weights and saves its pictures.

* :mod:`~attnlab.labs.demo` — ``make demo`` / ``attnlab demo``: a German→English translator
  trained from scratch on Multi30k, its BLEU, samples and cross-attention picture (Ba (CSC413
  Lecture 8), "Transformer Machine Translation")
* :mod:`~attnlab.labs.pooling` — attention pooling as kernel regression (López et al.
  (Attention Mechanisms), "Queries, Keys and Values")

Each lab module has ``run(out_dir) -> Path`` that prints a short report and saves a figure.
Modules are imported on demand (they pull in matplotlib).
"""
