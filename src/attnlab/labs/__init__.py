"""Runnable lecture figures: each lab shows one idea of the decks on real data or real weights,
saves its pictures and writes a short report with its numbers beside the slides'.

``attnlab lab`` lists them, ``attnlab lab NAME`` runs one and ``attnlab lab all`` every one
(:mod:`~attnlab.labs.registry`). A lab module has ``TITLE``, ``SOURCE`` and
``run(out_dir, options: LabOptions) -> LabReport`` (:mod:`~attnlab.labs.report`); the README
and docs/lectures.md list the fifteen and what each shows. :mod:`~attnlab.labs.demo` is
``make demo``: a German→English translator trained from scratch on Multi30k.

Modules are imported on demand (they pull in matplotlib, and some a pretrained encoder).
"""
