"""Which ``malloc`` the ``attnlab`` command runs with, and how it gets it.

A training step frees and allocates the same large activations again and again, in shapes
that change with every batch. glibc's ``malloc`` either returns such blocks to the kernel
(so each step page-faults its activations in afresh: a translation step twice as slow) or,
told to keep them (:func:`attnlab.runtime.keep_freed_memory`), keeps a heap that fragments
as the batch shapes vary and grows far past what the tensors need. A caching allocator
with size classes reuses freed blocks without that growth; PyTorch's CPU performance guide
recommends TCMalloc or jemalloc. On the 2-core AMD machine of docs/benchmarks.md
("Memory"), the Bahdanau recipe's first 150 steps and its test decoding peaked at 3.04 GB
resident with glibc keeping its memory and 2.01 GB with TCMalloc, in 108 s against 110 s;
jemalloc peaked at 1.73 GB but gave the page faults back (41 million of them, 66 s of system
time: 3 min 0 s), so TCMalloc comes first.

Neither can be switched on from inside a running Python: the dynamic loader must see it
first. So :func:`relaunch` — the first thing the command does — executes the same command
again, once, with ``LD_PRELOAD`` naming the allocator, when it is installed (Debian's
``libtcmalloc-minimal4``: ``make allocator``; or ``libjemalloc2``) and nothing else is
preloaded. ``ATTNLAB_ALLOCATOR`` chooses: ``auto`` (the default: TCMalloc, else jemalloc, else
glibc), ``tcmalloc``, ``jemalloc`` or ``glibc`` (no relaunch; glibc keeps its freed memory).
:func:`in_use` names the allocator this process runs with, for the run header.
"""

from __future__ import annotations

import ctypes.util
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["CHOICES", "LIBRARIES", "choose", "in_use", "relaunch"]

LIBRARIES = {"tcmalloc": "tcmalloc_minimal", "jemalloc": "jemalloc"}  # name -> library to find
PACKAGES = {"tcmalloc": "Debian's libtcmalloc-minimal4: make allocator", "jemalloc": "Debian's libjemalloc2"}
CHOICES = ("auto", "tcmalloc", "jemalloc", "glibc")
_LOADED = "ATTNLAB_ALLOCATOR_LOADED"  # set in the relaunched process: never relaunch twice


def _library(name: str) -> str | None:
    return ctypes.util.find_library(LIBRARIES[name]) if sys.platform.startswith("linux") else None


def choose(env: Mapping[str, str]) -> str | None:
    """The library to preload for the environment ``env`` (``libtcmalloc_minimal.so.4``), or ``None``:
    on glibc's choice, outside Linux, with something preloaded already, after a relaunch, or
    when the chosen allocator is not installed (``auto`` then falls back to glibc; a named one
    is refused in one line)."""
    choice = env.get("ATTNLAB_ALLOCATOR", "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        raise ValueError(f"ATTNLAB_ALLOCATOR must be one of {', '.join(CHOICES)}, got {choice!r}")
    if choice == "glibc" or env.get(_LOADED) or env.get("LD_PRELOAD"):
        return None
    names = tuple(LIBRARIES) if choice == "auto" else (choice,)
    for name in names:
        if (library := _library(name)) is not None:
            return library
    if choice != "auto":
        raise ValueError(f"ATTNLAB_ALLOCATOR={choice} but lib{LIBRARIES[choice]} is not installed "
                         f"({PACKAGES[choice]})")
    return None


def relaunch(argv: Sequence[str]) -> None:
    """Replace this process by ``python -m attnlab.cli argv...`` with the chosen allocator
    preloaded (:func:`choose`); return, doing nothing, when there is none to load."""
    library = choose(os.environ)
    if library is None:
        return
    env = {**os.environ, "LD_PRELOAD": library, _LOADED: library}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "attnlab.cli", *argv], env)


def in_use() -> str:
    """``tcmalloc``, ``jemalloc`` or ``glibc``: the ``malloc`` mapped into this process."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return "the system's"
    for name, library in LIBRARIES.items():
        if f"lib{library}" in maps:
            return name
    return "glibc"
